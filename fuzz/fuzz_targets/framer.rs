#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| lnetcap_fuzz::framer(data));
