//! A live interface through libpcap (the `pcap` crate): snaplen, BPF filter,
//! promiscuous mode, buffer size, nanosecond timestamps where the kernel gives them, and
//! the kernel's drop counters. Errors a user meets are one line each that says what to do.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use lnetcap_analysis::{Next, PacketSource};
use lnetcap_capture::{CaptureError, Packet};

use crate::control::Stop;
use crate::source::{Counters, Deadline, POLL};

/// How to open the interface.
#[derive(Debug, Clone)]
pub struct IfaceOptions {
    /// Interface name (`any` for all).
    pub name: String,
    /// Bytes kept per packet.
    pub snaplen: u32,
    /// BPF filter expression.
    pub filter: String,
    /// Promiscuous mode.
    pub promisc: bool,
    /// Kernel buffer, bytes.
    pub buffer_size: u32,
}

/// How often the kernel's counters are read.
const STATS_EVERY: Duration = Duration::from_millis(500);

/// An open interface.
pub struct Interface {
    cap: pcap::Capture<pcap::Active>,
    linktype: u32,
    nanos: bool,
    frame: u64,
    stop: Stop,
    deadline: Deadline,
    counters: Arc<Counters>,
    stats_at: Instant,
    buf: Vec<u8>,
    /// After a stop: read what the kernel already holds until then.
    drain_until: Option<Instant>,
}

/// How long a stopped capture goes on reading what the kernel had already captured (its
/// buffer, and the block libpcap's timeout has not handed over yet).
const DRAIN: Duration = Duration::from_millis(300);

impl std::fmt::Debug for Interface {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Interface")
            .field("linktype", &self.linktype)
            .field("frame", &self.frame)
            .finish_non_exhaustive()
    }
}

/// The capability a capture needs, said once.
const PERMISSION: &str = "capturing needs CAP_NET_RAW (and CAP_NET_ADMIN for --promisc): run as root, or grant \
     it once with `sudo setcap cap_net_raw,cap_net_admin=eip $(command -v lnetcap)`";

/// Why an interface could not be opened, as the user should read it.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// No interface of that name.
    #[error("no such interface '{name}' (interfaces here: {known})")]
    NoSuchInterface {
        /// Asked for.
        name: String,
        /// What libpcap lists.
        known: String,
    },
    /// Not allowed to capture.
    #[error("permission denied capturing on '{name}': {PERMISSION} (libpcap: {msg})")]
    Permission {
        /// Interface.
        name: String,
        /// libpcap's words.
        msg: String,
    },
    /// The BPF filter did not compile.
    #[error("--filter '{filter}' is not a valid capture filter: {msg}")]
    Filter {
        /// The expression.
        filter: String,
        /// libpcap's words.
        msg: String,
    },
    /// Anything else libpcap said.
    #[error("cannot capture on '{name}': {msg}")]
    Other {
        /// Interface.
        name: String,
        /// libpcap's words.
        msg: String,
    },
}

impl OpenError {
    /// A usage error (exit 2) rather than an input that cannot be opened (exit 1).
    pub fn is_usage(&self) -> bool {
        matches!(self, Self::Filter { .. })
    }
}

fn pcap_msg(e: &pcap::Error) -> String {
    e.to_string()
}

fn classify(name: &str, e: &pcap::Error) -> OpenError {
    let msg = pcap_msg(e);
    let lower = msg.to_lowercase();
    if lower.contains("permission") || lower.contains("not permitted") {
        OpenError::Permission { name: name.into(), msg }
    } else if lower.contains("no such device") || lower.contains("doesn't exist") || lower.contains("no such") {
        OpenError::NoSuchInterface { name: name.into(), known: known_interfaces() }
    } else {
        OpenError::Other { name: name.into(), msg }
    }
}

fn known_interfaces() -> String {
    match pcap::Device::list() {
        Ok(list) => list.into_iter().map(|d| d.name).collect::<Vec<_>>().join(", "),
        Err(e) => format!("cannot list them: {e}"),
    }
}

impl Interface {
    /// Opens `o.name` and applies the filter.
    pub fn open(o: &IfaceOptions, stop: Stop, deadline: Deadline, counters: Arc<Counters>) -> Result<Self, OpenError> {
        let (mut cap, nanos) = match activate(o, true) {
            Ok(c) => (c, true),
            // Some kernels and libpcap builds cannot give nanoseconds: microseconds then.
            Err(OpenError::Other { .. }) => (activate(o, false)?, false),
            Err(e) => return Err(e),
        };
        cap.filter(&o.filter, true).map_err(|e| OpenError::Filter { filter: o.filter.clone(), msg: pcap_msg(&e) })?;
        let linktype = cap.get_datalink().0 as u32;
        Ok(Self {
            cap,
            linktype,
            nanos,
            frame: 0,
            stop,
            deadline,
            counters,
            stats_at: Instant::now(),
            buf: Vec::new(),
            drain_until: None,
        })
    }

    /// Reads the kernel's counters into the shared ones.
    pub fn read_stats(&mut self) {
        if let Ok(s) = self.cap.stats() {
            self.counters.received.store(u64::from(s.received), Ordering::Relaxed);
            self.counters.dropped.store(u64::from(s.dropped), Ordering::Relaxed);
            self.counters.dropped_interface.store(u64::from(s.if_dropped), Ordering::Relaxed);
        }
        self.stats_at = Instant::now();
    }
}

fn activate(o: &IfaceOptions, nanos: bool) -> Result<pcap::Capture<pcap::Active>, OpenError> {
    if o.name != "any" && pcap::Device::list().is_ok_and(|l| !l.iter().any(|d| d.name == o.name)) {
        return Err(OpenError::NoSuchInterface { name: o.name.clone(), known: known_interfaces() });
    }
    let precision = if nanos { pcap::Precision::Nano } else { pcap::Precision::Micro };
    pcap::Capture::from_device(o.name.as_str())
        .map_err(|e| classify(&o.name, &e))?
        .snaplen(o.snaplen as i32)
        .promisc(o.promisc)
        .buffer_size(o.buffer_size as i32)
        .timeout(POLL.as_millis() as i32)
        .precision(precision)
        .open()
        .map_err(|e| classify(&o.name, &e))?
        // Non-blocking: libpcap's buffer timeout does not return while no packet comes
        // (TPACKET_V3), and the run must see its stop flag and tick while idle.
        .setnonblock()
        .map_err(|e| classify(&o.name, &e))
}

/// How long to wait when the kernel has nothing (non-blocking reads).
const IDLE_WAIT: Duration = Duration::from_millis(2);

impl PacketSource for Interface {
    /// Blocks until a packet (copied: the packet loop uses [`PacketSource::poll`]).
    fn next_packet(&mut self) -> Result<Option<Packet<'_>>, CaptureError> {
        let (meta, data) = loop {
            match self.poll()? {
                Next::Packet(p) => break (Packet { data: &[], shared: None, ..p }, p.data.to_vec()),
                Next::Tick => continue,
                Next::End => return Ok(None),
            }
        };
        self.buf = data;
        Ok(Some(Packet { data: &self.buf, shared: None, ..meta }))
    }

    fn poll(&mut self) -> Result<Next<'_>, CaptureError> {
        if self.deadline.check(&self.stop) {
            let until = *self.drain_until.get_or_insert_with(|| Instant::now() + DRAIN);
            if Instant::now() >= until {
                self.read_stats();
                return Ok(Next::End);
            }
        }
        if self.stats_at.elapsed() >= STATS_EVERY {
            self.read_stats();
        }
        let (linktype, nanos) = (self.linktype, self.nanos);
        match self.cap.next_packet() {
            Ok(p) => {
                self.frame += 1;
                let ts = p.header.ts;
                #[allow(clippy::useless_conversion)] // time_t and suseconds_t are i32 on some targets
                let (secs, sub) = (i64::from(ts.tv_sec), i64::from(ts.tv_usec));
                let sub = sub * if nanos { 1 } else { 1000 };
                self.counters.count(p.header.len);
                Ok(Next::Packet(Packet {
                    frame: self.frame,
                    ts_ns: secs * 1_000_000_000 + sub,
                    linktype,
                    origlen: p.header.len,
                    data: p.data,
                    offset: 0,
                    interface: 0,
                    shared: None,
                }))
            }
            Err(pcap::Error::TimeoutExpired) => {
                std::thread::sleep(IDLE_WAIT);
                Ok(Next::Tick)
            }
            Err(e) => Err(read_error(&e)),
        }
    }
}

fn read_error(e: &pcap::Error) -> CaptureError {
    CaptureError::Io { what: "the interface".into(), source: std::io::Error::other(pcap_msg(e)) }
}
