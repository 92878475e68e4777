//! Errors of the capture layer. Each says what went wrong and where (byte offset in the
//! decompressed capture stream, frame number of the record being read).

use std::io;

/// A capture file could not be opened or read further.
#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    /// The file could not be opened or read.
    #[error("cannot read {what}: {source}")]
    Io {
        /// What was being read (file name, "stdin", "gzip stream", ...).
        what: String,
        /// The underlying I/O error.
        #[source]
        source: io::Error,
    },
    /// The first bytes are not a pcap or pcapng header (after decompression).
    #[error("not a pcap or pcapng file: first bytes are {first_bytes} (expected a pcap magic a1b2c3d4/a1b23c4d, pcapng 0a0d0d0a, or gzip/zstd)")]
    NotACapture {
        /// Hex of the first (up to 8) bytes.
        first_bytes: String,
    },
    /// The input ended in the middle of a record.
    #[error("capture truncated at offset {offset}: frame {frame} needs {needed} more bytes than the file has (last record cut short)")]
    Truncated {
        /// Byte offset of the incomplete record.
        offset: u64,
        /// Frame number the incomplete record would have had.
        frame: u64,
        /// Bytes missing.
        needed: u64,
    },
    /// A record header is invalid (e.g. a length that cannot be right).
    #[error("malformed {container} record at offset {offset} (frame {frame}): {reason}")]
    Malformed {
        /// "pcap" or "pcapng".
        container: &'static str,
        /// Byte offset of the record.
        offset: u64,
        /// Frame number of the record (the next frame to be read).
        frame: u64,
        /// What is wrong.
        reason: String,
    },
    /// A record read and analysed as captured although its header cannot be true (more
    /// bytes captured than the frame had): a notice, not a frame lost.
    #[error("suspect {container} record at offset {offset} (frame {frame}): {reason}")]
    Suspect {
        /// "pcap" or "pcapng".
        container: &'static str,
        /// Byte offset of the record.
        offset: u64,
        /// Frame number of the record.
        frame: u64,
        /// What is wrong, and what was done.
        reason: String,
    },
}

impl CaptureError {
    /// The frame was delivered anyway ([`CaptureError::Suspect`]): the warning must not
    /// count it as unreadable.
    pub fn frame_delivered(&self) -> bool {
        matches!(self, Self::Suspect { .. })
    }
}
