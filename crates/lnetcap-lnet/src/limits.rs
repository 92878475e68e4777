//! Named limits of the LNet layer.

/// Header bytes kept per message in progress (largest: V1 HELLO with 16 IPs = 136).
pub const HDR_CAP: usize = 160;

/// Payload bytes kept per message to decode lustre_msg / srpc_msg / ping info.
pub const PEEK_BYTES: usize = 512;
