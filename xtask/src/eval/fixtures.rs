//! The HTTP server a task's `serve/` files are served from, flaky when the task says so.

use super::*;

/// Serves a directory on 127.0.0.1 for one run. Flaky: the first request for each path
/// answers 503.
pub(super) struct FileServer {
    pub(super) base: String,
    stop: Arc<AtomicBool>,
}

/// The port a task's fixtures are served on: the same in every run, so that the URL in the
/// message, and with it the whole prompt, is the same too. With a new port per run, the
/// same task at temperature 0 took different paths from its first program on (eval round 8).
pub(super) fn fixture_port(task: &str) -> u16 {
    let hash = task.bytes().fold(2_166_136_261_u32, |hash, byte| {
        (hash ^ u32::from(byte)).wrapping_mul(16_777_619)
    });
    41_000 + (hash % 1_000) as u16
}

impl FileServer {
    /// Serves on `port` when it is free, else on any free port.
    pub(super) fn start(dir: PathBuf, flaky: bool, port: u16) -> anyhow::Result<Self> {
        let listener =
            TcpListener::bind(("127.0.0.1", port)).or_else(|_| TcpListener::bind("127.0.0.1:0"))?;
        let base = format!("http://{}", listener.local_addr()?);
        listener.set_nonblocking(true)?;
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let seen = Arc::new(Mutex::new(std::collections::HashSet::<String>::new()));
        std::thread::spawn(move || {
            while !stopped.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((stream, _)) => {
                        let dir = dir.clone();
                        let seen = seen.clone();
                        std::thread::spawn(move || {
                            let _ = serve(stream, &dir, flaky, &seen);
                        });
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(20)),
                }
            }
        });
        Ok(Self { base, stop })
    }
}

impl Drop for FileServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

pub(super) fn serve(
    stream: TcpStream,
    dir: &Path,
    flaky: bool,
    seen: &Mutex<std::collections::HashSet<String>>,
) -> anyhow::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut request = String::new();
    reader.read_line(&mut request)?;
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header)? == 0 || header.trim().is_empty() {
            break;
        }
    }
    let path = request
        .split_whitespace()
        .nth(1)
        .unwrap_or("/")
        .split('?')
        .next()
        .unwrap_or("/")
        .trim_start_matches('/')
        .to_owned();
    let first = seen
        .lock()
        .map_err(|_| anyhow::anyhow!("poisoned"))?
        .insert(path.clone());
    let safe = !path.split('/').any(|part| part == ".." || part.is_empty());
    let (status, body, kind) = if flaky && first {
        (
            "503 Service Unavailable",
            b"temporarily unavailable, try again".to_vec(),
            "text/plain",
        )
    } else {
        match std::fs::read(dir.join(&path)) {
            Ok(body) if safe => {
                let kind = if path.ends_with(".json") {
                    "application/json"
                } else {
                    "text/plain; charset=utf-8"
                };
                ("200 OK", body, kind)
            }
            _ => ("404 Not Found", b"not found".to_vec(), "text/plain"),
        }
    };
    let mut stream = stream;
    write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )?;
    stream.write_all(&body)?;
    Ok(())
}
