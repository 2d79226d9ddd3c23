//! The worker side of the sandbox: prepare a context, wait for a script, run it, report, and
//! start over with a fresh context. The same loop serves a worker process (over stdin and
//! stdout) and an in-process worker thread (over channels).

use std::cell::RefCell;
use std::io::{Read, Write};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::engine::{EngineOptions, HostLink, execute, prepare_context};
use crate::protocol::{
    CodePath, ExecutionOutcome, HostReply, HostRequest, ScriptError, ScriptErrorKind, ToHost,
    ToWorker,
};

/// Set (to `1`) in the environment of a process started as a sandbox worker.
pub(crate) const WORKER_ENV: &str = "AGENTIC_SANDBOX_WORKER";
/// The worker's memory limit in bytes, on top of what the idle worker already maps.
pub(crate) const MEMORY_ENV: &str = "AGENTIC_SANDBOX_MEMORY";
/// Native stack of the thread that runs scripts.
pub(crate) const ENGINE_STACK_BYTES: usize = 64 * 1024 * 1024;
/// A worker process runs at most this many scripts, then exits and is replaced.
pub(crate) const EXECUTIONS_PER_WORKER: u32 = 200;

static HOST_IS_WORKER_CAPABLE: AtomicBool = AtomicBool::new(false);

/// Call first thing in `main` of a binary that hosts code mode: when the process was started
/// as a sandbox worker it serves scripts and exits; otherwise it returns at once, and the
/// binary may then start its own workers by running itself.
pub fn run_worker_if_requested() {
    if std::env::var_os(WORKER_ENV).is_some() {
        std::process::exit(worker_process_main());
    }
    HOST_IS_WORKER_CAPABLE.store(true, Ordering::SeqCst);
}

/// Whether [`run_worker_if_requested`] ran in this process, so it can be its own worker.
pub(crate) fn host_is_worker_capable() -> bool {
    HOST_IS_WORKER_CAPABLE.load(Ordering::SeqCst)
}

/// The whole life of a worker process. Returns its exit code.
pub fn worker_process_main() -> i32 {
    if let Err(error) = apply_memory_limit() {
        eprintln!("agentic-sandbox: {error}");
        return 3;
    }
    let engine = std::thread::Builder::new()
        .name("sandbox".to_owned())
        .stack_size(ENGINE_STACK_BYTES)
        .spawn(|| {
            let transport = StdioTransport {
                input: LineReader::new(std::io::stdin()),
                output: std::io::stdout().lock(),
            };
            serve(
                transport,
                EngineOptions {
                    loop_iteration_limit: None,
                    explain: &crate::explain::ForModels,
                },
                EXECUTIONS_PER_WORKER,
            );
        });
    match engine.map(std::thread::JoinHandle::join) {
        Ok(Ok(())) => 0,
        _ => 4,
    }
}

/// How a worker talks to its host.
pub(crate) trait Transport {
    fn receive(&mut self) -> Option<ToWorker>;
    /// False once the host is gone.
    fn send(&mut self, message: ToHost) -> bool;
}

/// Serves up to `executions` scripts, each in a fresh context, until the host goes away.
pub(crate) fn serve<T: Transport + 'static>(transport: T, options: EngineOptions, executions: u32) {
    let transport = Rc::new(RefCell::new(transport));
    let mut last_tools: Option<Vec<crate::protocol::ToolBinding>> = None;
    for _ in 0..executions {
        let prepared = match prepare_context(options, last_tools.as_deref()) {
            Ok(prepared) => prepared,
            Err(error) => {
                eprintln!("agentic-sandbox: could not prepare a context: {error}");
                return;
            }
        };
        if !transport.borrow_mut().send(ToHost::Ready) {
            return;
        }
        let request = loop {
            match transport.borrow_mut().receive() {
                Some(ToWorker::Execute(request)) => break request,
                // A reply nobody waits for (a late answer to a killed script): skip it.
                Some(ToWorker::Reply { .. }) => {}
                None => return,
            }
        };
        let link = Box::new(Link {
            transport: transport.clone(),
            next_id: 1,
        });
        let mut request = *request;
        if request.same_tools_as_before {
            request.tools = last_tools.clone().unwrap_or_default();
        }
        last_tools = Some(request.tools.clone());
        let store = request.store.clone();
        // Boa panics on a few scripts instead of throwing (an async function that recurses
        // without end hits the recursion limit inside `await`, which Boa holds cannot fail).
        // The script gets an error it can act on; the worker, whose engine state is now
        // unknown, stops and is replaced.
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            execute(prepared, request, link)
        }));
        let panicked = outcome.is_err();
        let outcome = outcome.unwrap_or_else(|panic| engine_fault(&*panic, store));
        if !transport
            .borrow_mut()
            .send(ToHost::Finished(Box::new(outcome)))
            || panicked
        {
            return;
        }
    }
}

/// The outcome of a script during which the engine panicked.
fn engine_fault(
    panic: &(dyn std::any::Any + Send),
    store: serde_json::Map<String, serde_json::Value>,
) -> ExecutionOutcome {
    let (kind, message) = if agentic_core::tool::panic_message(panic).contains("RuntimeLimit") {
        (
            ScriptErrorKind::Limit,
            "RangeError: the script recursed too deeply (a function, perhaps an async one, \
             that calls itself without end)"
                .to_owned(),
        )
    } else {
        (
            ScriptErrorKind::Runtime,
            "InternalError: the JavaScript engine could not run this script; write it \
             differently"
                .to_owned(),
        )
    };
    ExecutionOutcome {
        path: CodePath::Plain,
        result: Err(ScriptError {
            kind,
            message,
            line: None,
            column: None,
            source_line: None,
            hint: None,
        }),
        done: false,
        complete: None,
        store,
        clock: Vec::new(),
        // Whatever the program read before the engine fell over is unknown.
        guesses_read: true,
        misread: false,
        searched_in_vain: false,
    }
}

struct Link<T: Transport> {
    transport: Rc<RefCell<T>>,
    next_id: u64,
}

impl<T: Transport> HostLink for Link<T> {
    fn request(&mut self, request: HostRequest, clock: Vec<i64>) -> HostReply {
        let id = self.next_id;
        self.next_id += 1;
        let mut transport = self.transport.borrow_mut();
        if !transport.send(ToHost::Request { id, request, clock }) {
            return host_gone();
        }
        loop {
            match transport.receive() {
                Some(ToWorker::Reply {
                    id: answered,
                    reply,
                }) if answered == id => return reply,
                Some(_) => {}
                None => return host_gone(),
            }
        }
    }

    fn notify(&mut self, message: ToHost) {
        self.transport.borrow_mut().send(message);
    }
}

fn host_gone() -> HostReply {
    HostReply::Error {
        message: "the host went away".to_owned(),
    }
}

/// JSON lines over the process's stdin and stdout.
struct StdioTransport<W: Write> {
    input: LineReader<std::io::Stdin>,
    output: W,
}

/// Reads lines from a pipe. When the pipe is non-blocking it spins for a moment before it
/// sleeps in `poll`, because the other side usually answers within microseconds and a
/// sleep-and-wake costs far more.
pub(crate) struct LineReader<R: Read + rustix::fd::AsFd> {
    input: R,
    pending: Vec<u8>,
    spin: bool,
    /// Read buffer, allocated once.
    chunk: Box<[u8]>,
}

impl<R: Read + rustix::fd::AsFd> LineReader<R> {
    /// Makes `input` non-blocking if it can, to spin on it; otherwise reads block.
    pub(crate) fn new(input: R) -> Self {
        let spin = rustix::io::ioctl_fionbio(&input, true).is_ok();
        Self {
            input,
            pending: Vec::new(),
            spin,
            chunk: vec![0u8; 64 * 1024].into_boxed_slice(),
        }
    }

    /// The next line, without its newline; `None` at the end of the input.
    pub(crate) fn next_line(&mut self) -> Option<Vec<u8>> {
        let mut waiting_since: Option<std::time::Instant> = None;
        loop {
            if let Some(end) = self.pending.iter().position(|byte| *byte == b'\n') {
                let mut line: Vec<u8> = self.pending.drain(..=end).collect();
                line.pop();
                return Some(line);
            }
            match self.input.read(&mut self.chunk) {
                Ok(0) => return None,
                Ok(read) => {
                    self.pending.extend_from_slice(&self.chunk[..read]);
                    waiting_since = None;
                }
                Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
                Err(error) if error.kind() == std::io::ErrorKind::WouldBlock && self.spin => {
                    let since = *waiting_since.get_or_insert_with(std::time::Instant::now);
                    if since.elapsed() < SPIN_BEFORE_SLEEP {
                        std::hint::spin_loop();
                    } else {
                        let mut fds = [rustix::event::PollFd::new(
                            &self.input,
                            rustix::event::PollFlags::IN,
                        )];
                        let _ = rustix::event::poll(&mut fds, None);
                    }
                }
                Err(_) => return None,
            }
        }
    }
}

impl<W: Write> Transport for StdioTransport<W> {
    fn receive(&mut self) -> Option<ToWorker> {
        loop {
            let line = self.input.next_line()?;
            match serde_json::from_slice(&line) {
                Ok(message) => return Some(message),
                Err(error) => eprintln!("agentic-sandbox: unreadable message: {error}"),
            }
        }
    }

    fn send(&mut self, message: ToHost) -> bool {
        let Ok(mut line) = serde_json::to_vec(&message) else {
            return false;
        };
        line.push(b'\n');
        self.output.write_all(&line).is_ok() && self.output.flush().is_ok()
    }
}

/// Caps the address space of this process: what it maps now plus the engine's stack plus the
/// configured budget. Allocation beyond it fails, and the process aborts instead of the host.
fn apply_memory_limit() -> Result<(), String> {
    let Some(budget) = std::env::var(MEMORY_ENV)
        .ok()
        .and_then(|value| value.parse::<u64>().ok())
    else {
        return Ok(());
    };
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .next()
        .and_then(|pages| pages.parse().ok())
        .unwrap_or(0);
    let mapped = pages * rustix::param::page_size() as u64;
    let limit = mapped + ENGINE_STACK_BYTES as u64 + budget;
    rustix::process::setrlimit(
        rustix::process::Resource::As,
        rustix::process::Rlimit {
            current: Some(limit),
            maximum: Some(limit),
        },
    )
    .map_err(|error| format!("could not set the memory limit: {error}"))
}

/// A worker thread's end of two channels, for the in-process backend.
pub(crate) struct ChannelTransport {
    pub(crate) from_host: std::sync::mpsc::Receiver<ToWorker>,
    pub(crate) to_host: tokio::sync::mpsc::UnboundedSender<ToHost>,
}

/// Calls `attempt` until it gives a value or `limit` has passed.
pub(crate) fn spin_for<T>(
    limit: std::time::Duration,
    mut attempt: impl FnMut() -> Option<T>,
) -> Option<T> {
    let started = std::time::Instant::now();
    loop {
        // The clock is read once per 64 attempts: an attempt is a few nanoseconds, a clock
        // read several times that, and it delays noticing the message.
        for _ in 0..64 {
            if let Some(value) = attempt() {
                return Some(value);
            }
            std::hint::spin_loop();
        }
        if started.elapsed() >= limit {
            return None;
        }
    }
}

/// How long a waiting side spins before it sleeps. A host answering a tool call usually
/// replies within microseconds; sleeping and being woken costs far more than that.
pub(crate) const SPIN_BEFORE_SLEEP: std::time::Duration = std::time::Duration::from_micros(50);
/// How long the host spins for a worker's next message. Longer than the worker's spin: a
/// short script finishes within a few hundred microseconds, and the host has a core to spare
/// while its script runs.
pub(crate) const HOST_SPIN_BEFORE_SLEEP: std::time::Duration =
    std::time::Duration::from_micros(300);

impl Transport for ChannelTransport {
    fn receive(&mut self) -> Option<ToWorker> {
        let spun = spin_for(SPIN_BEFORE_SLEEP, || match self.from_host.try_recv() {
            Ok(message) => Some(Some(message)),
            Err(std::sync::mpsc::TryRecvError::Disconnected) => Some(None),
            Err(std::sync::mpsc::TryRecvError::Empty) => None,
        });
        match spun {
            Some(received) => received,
            None => self.from_host.recv().ok(),
        }
    }

    fn send(&mut self, message: ToHost) -> bool {
        self.to_host.send(message).is_ok()
    }
}
