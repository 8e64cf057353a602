//! The address `serve --listen` takes.

/// Parses `serve --listen`: an IP address and a port (`127.0.0.1:7381`,
/// `[::1]:7381`, `0.0.0.0:7381`), or `localhost:PORT`, which is
/// `127.0.0.1:PORT`. A port alone or a host name is refused, saying what
/// to give instead; no name is looked up, so the address is the one given.
pub fn parse_listen(text: &str) -> Result<std::net::SocketAddr, String> {
    let text = text.trim();
    if let Ok(address) = text.parse() {
        return Ok(address);
    }
    let (host, port) = text.rsplit_once(':').unwrap_or(("", text));
    let Ok(port) = port.parse::<u16>() else {
        return Err(format!(
            "{text:?} is not an address to listen on: give HOST:PORT, such as 127.0.0.1:7381 \
             (this machine only), localhost:7381 or 0.0.0.0:7381 (every interface)"
        ));
    };
    if host.eq_ignore_ascii_case("localhost") {
        return Ok(std::net::SocketAddr::from(([127, 0, 0, 1], port)));
    }
    if host.is_empty() {
        return Err(format!(
            "{text:?} is a port without an address: give 127.0.0.1:{port} (this machine only) \
             or 0.0.0.0:{port} (every interface)"
        ));
    }
    Err(format!(
        "{host:?} is not an IP address: --listen takes an IP address and a port, such as \
         127.0.0.1:{port}, 0.0.0.0:{port} or [::1]:{port} (localhost:{port} is 127.0.0.1:{port})"
    ))
}
