//! Names of PtlRPC opcodes and LNet / Lustre portals (wire-format.md §5.1, §5.5, §6.1).

/// Name of a PtlRPC opcode, `None` when unknown.
pub fn opc_name(opc: u32) -> Option<&'static str> {
    Some(match opc {
        0 => "OST_REPLY",
        1 => "OST_GETATTR",
        2 => "OST_SETATTR",
        3 => "OST_READ",
        4 => "OST_WRITE",
        5 => "OST_CREATE",
        6 => "OST_DESTROY",
        7 => "OST_GET_INFO",
        8 => "OST_CONNECT",
        9 => "OST_DISCONNECT",
        10 => "OST_PUNCH",
        11 => "OST_OPEN",
        12 => "OST_CLOSE",
        13 => "OST_STATFS",
        16 => "OST_SYNC",
        17 => "OST_SET_INFO",
        18 => "OST_QUOTACHECK",
        19 => "OST_QUOTACTL",
        20 => "OST_QUOTA_ADJUST_QUNIT",
        21 => "OST_LADVISE",
        22 => "OST_FALLOCATE",
        23 => "OST_SEEK",
        33 => "MDS_GETATTR",
        34 => "MDS_GETATTR_NAME",
        35 => "MDS_CLOSE",
        36 => "MDS_REINT",
        37 => "MDS_READPAGE",
        38 => "MDS_CONNECT",
        39 => "MDS_DISCONNECT",
        40 => "MDS_GET_ROOT",
        41 => "MDS_STATFS",
        42 => "MDS_PIN",
        43 => "MDS_UNPIN",
        44 => "MDS_SYNC",
        45 => "MDS_DONE_WRITING",
        46 => "MDS_SET_INFO",
        47 => "MDS_QUOTACHECK",
        48 => "MDS_QUOTACTL",
        49 => "MDS_GETXATTR",
        50 => "MDS_SETXATTR",
        51 => "MDS_WRITEPAGE",
        52 => "MDS_IS_SUBDIR",
        53 => "MDS_GET_INFO",
        54 => "MDS_HSM_STATE_GET",
        55 => "MDS_HSM_STATE_SET",
        56 => "MDS_HSM_ACTION",
        57 => "MDS_HSM_PROGRESS",
        58 => "MDS_HSM_REQUEST",
        59 => "MDS_HSM_CT_REGISTER",
        60 => "MDS_HSM_CT_UNREGISTER",
        61 => "MDS_SWAP_LAYOUTS",
        62 => "MDS_RMFID",
        63 => "MDS_BATCH",
        64 => "MDS_HSM_DATA_VERSION",
        101 => "LDLM_ENQUEUE",
        102 => "LDLM_CONVERT",
        103 => "LDLM_CANCEL",
        104 => "LDLM_BL_CALLBACK",
        105 => "LDLM_CP_CALLBACK",
        106 => "LDLM_GL_CALLBACK",
        107 => "LDLM_SET_INFO",
        250 => "MGS_CONNECT",
        251 => "MGS_DISCONNECT",
        252 => "MGS_EXCEPTION",
        253 => "MGS_TARGET_REG",
        254 => "MGS_TARGET_DEL",
        255 => "MGS_SET_INFO",
        256 => "MGS_CONFIG_READ",
        400 => "OBD_PING",
        401 => "OBD_LOG_CANCEL",
        402 => "OBD_QC_CALLBACK",
        403 => "OBD_IDX_READ",
        501 => "LLOG_ORIGIN_HANDLE_CREATE",
        502 => "LLOG_ORIGIN_HANDLE_NEXT_BLOCK",
        503 => "LLOG_ORIGIN_HANDLE_READ_HEADER",
        504 => "LLOG_ORIGIN_HANDLE_WRITE_REC",
        505 => "LLOG_ORIGIN_HANDLE_CLOSE",
        506 => "LLOG_ORIGIN_CONNECT",
        507 => "LLOG_CATINFO",
        508 => "LLOG_ORIGIN_HANDLE_PREV_BLOCK",
        509 => "LLOG_ORIGIN_HANDLE_DESTROY",
        601 => "QUOTA_DQACQ",
        602 => "QUOTA_DQREL",
        700 => "SEQ_QUERY",
        801 => "SEC_CTX_INIT",
        802 => "SEC_CTX_INIT_CONT",
        803 => "SEC_CTX_FINI",
        900 => "FLD_QUERY",
        901 => "FLD_READ",
        1000 => "OUT_UPDATE",
        1101 => "LFSCK_NOTIFY",
        1102 => "LFSCK_QUERY",
        _ => return None,
    })
}

/// Name of a portal, `None` when unknown.
pub fn portal_name(p: u32) -> Option<&'static str> {
    Some(match p {
        0 => "LNET_RESERVED",
        1 => "CONNMGR_REQUEST",
        2 => "CONNMGR_REPLY",
        4 => "OSC_REPLY",
        6 => "OST_IO",
        7 => "OST_CREATE",
        8 => "OST_BULK",
        10 => "MDC_REPLY",
        12 => "MDS_REQUEST",
        13 => "MDS_IO",
        14 => "MDS_BULK",
        15 => "LDLM_CB_REQUEST",
        16 => "LDLM_CB_REPLY",
        17 => "LDLM_CANCEL_REQUEST",
        18 => "LDLM_CANCEL_REPLY",
        22 => "MDS_SETATTR",
        23 => "MDS_READPAGE",
        24 => "OUT",
        25 => "MGC_REPLY",
        26 => "MGS_REQUEST",
        27 => "MGS_REPLY",
        28 => "OST_REQUEST",
        29 => "FLD_REQUEST",
        30 => "SEQ_METADATA",
        31 => "SEQ_DATA",
        32 => "SEQ_CONTROLLER",
        33 => "MGS_BULK",
        SRPC_REQUEST_PORTAL => "SRPC_REQUEST",
        SRPC_FRAMEWORK_REQUEST_PORTAL => "SRPC_FRAMEWORK_REQUEST",
        SRPC_RDMA_PORTAL => "SRPC_RDMA",
        _ => return None,
    })
}

/// LNet's reserved portal (0): discovery pushes and pings (`LNET_RESERVED_PORTAL`).
pub const LNET_RESERVED_PORTAL: u32 = 0;
/// LNet selftest requests (`SRPC_REQUEST_PORTAL`).
pub const SRPC_REQUEST_PORTAL: u32 = 50;
/// LNet selftest framework (console) requests (`SRPC_FRAMEWORK_REQUEST_PORTAL`).
pub const SRPC_FRAMEWORK_REQUEST_PORTAL: u32 = 51;
/// LNet selftest bulk and replies (`SRPC_RDMA_PORTAL`).
pub const SRPC_RDMA_PORTAL: u32 = 52;

/// Portals whose PUT payloads are raw bulk data (never decoded as messages).
pub fn is_bulk_portal(p: u32) -> bool {
    matches!(p, 8 | 14 | 33 | SRPC_RDMA_PORTAL)
}

/// Portals on which PtlRPC requests arrive.
pub fn is_request_portal(p: u32) -> bool {
    matches!(p, 1 | 6 | 7 | 12 | 13 | 15 | 17 | 22 | 23 | 24 | 26 | 28 | 29 | 30 | 31 | 32)
}

/// Portals on which PtlRPC replies arrive.
pub fn is_reply_portal(p: u32) -> bool {
    matches!(p, 2 | 4 | 10 | 16 | 18 | 25 | 27)
}
