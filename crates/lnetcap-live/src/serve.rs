//! `--prometheus ADDR:PORT`: /metrics over HTTP from the latest view, on a thread of
//! its own (tiny_http), until the run ends.

use std::sync::Arc;
use std::thread::JoinHandle;

use crate::metrics::render;
use crate::view::Board;

/// The metrics server of a run.
pub struct Server {
    http: Arc<tiny_http::Server>,
    thread: Option<JoinHandle<()>>,
    /// The address it listens on (the port chosen when 0 was asked).
    pub addr: String,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server").field("addr", &self.addr).finish_non_exhaustive()
    }
}

const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

impl Server {
    /// Listens on `addr` and serves `board`'s latest view.
    pub fn start(addr: &str, board: Board) -> anyhow::Result<Self> {
        let http =
            tiny_http::Server::http(addr).map_err(|e| anyhow::anyhow!("--prometheus {addr}: cannot listen: {e}"))?;
        let http = Arc::new(http);
        let bound = http.server_addr().to_ip().map_or_else(|| addr.to_string(), |a| a.to_string());
        let srv = Arc::clone(&http);
        let thread = std::thread::Builder::new().name("metrics".into()).spawn(move || {
            for req in srv.incoming_requests() {
                let _ = answer(req, &board);
            }
        })?;
        Ok(Self { http, thread: Some(thread), addr: bound })
    }

    /// Stops serving.
    pub fn stop(mut self) {
        self.http.unblock();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn answer(req: tiny_http::Request, board: &Board) -> std::io::Result<()> {
    let header = |v: &str| tiny_http::Header::from_bytes(&b"Content-Type"[..], v.as_bytes()).expect("ASCII header");
    let path = req.url().split('?').next().unwrap_or("");
    match path {
        "/metrics" => match render(&board.latest()) {
            Ok(text) => req.respond(tiny_http::Response::from_string(text).with_header(header(CONTENT_TYPE))),
            Err(e) => req.respond(tiny_http::Response::from_string(format!("{e}\n")).with_status_code(500)),
        },
        "/" => req.respond(
            tiny_http::Response::from_string(
                "<html><body><h1>lnetcap live</h1><p><a href=\"/metrics\">/metrics</a></p></body></html>\n",
            )
            .with_header(header("text/html; charset=utf-8")),
        ),
        _ => req.respond(tiny_http::Response::from_string("not found: try /metrics\n").with_status_code(404)),
    }
}
