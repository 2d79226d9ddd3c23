//! The sandbox worker program: runs model-written JavaScript for a host over stdin and stdout.
//! Hosts start it themselves; it is not meant to be run by hand.

fn main() {
    std::process::exit(agentic_interpreter::worker_process_main());
}
