//! What a script reads that is not its code: the clock and `Math.random()`, replayable
//! from a journal, and the promise jobs, run in order without reading the clock.

use std::cell::RefCell;

use boa_engine::object::FunctionObjectBuilder;
use boa_engine::property::PropertyDescriptor;
use boa_engine::{Context, JsNativeError, JsResult, JsValue, NativeFunction, js_string};

use super::*;

/// The time and randomness a script sees. `Math.random()` is SplitMix64 from a seed the host
/// may choose; `Date` reads the replayed times first, then the live clock, and every live
/// reading is reported with the next host request, so a journal can keep it.
#[derive(Debug, Default)]
pub(super) struct RunInputs {
    pub(super) random: u64,
    pub(super) replayed: std::collections::VecDeque<i64>,
    pub(super) live: Vec<i64>,
}

impl RunInputs {
    pub(super) fn new(determinism: &crate::protocol::Determinism) -> Self {
        Self {
            random: determinism.seed.unwrap_or_else(|| fastrand::u64(..)),
            replayed: determinism.clock.iter().copied().collect(),
            live: Vec::new(),
        }
    }

    pub(super) fn next_random(&mut self) -> f64 {
        self.random = self.random.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.random;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        // The top 53 bits, as a double in [0, 1).
        (z >> 11) as f64 / (1u64 << 53) as f64
    }

    pub(super) fn now(&mut self) -> i64 {
        if let Some(replayed) = self.replayed.pop_front() {
            return replayed;
        }
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |since| {
                i64::try_from(since.as_millis()).unwrap_or(i64::MAX)
            });
        self.live.push(now);
        now
    }
}

/// Boa's clock for `Date`, in whole milliseconds (all a journal keeps).
pub(super) struct ScriptClock;

impl boa_engine::context::time::Clock for ScriptClock {
    fn now(&self) -> boa_engine::context::time::JsInstant {
        let millis = RUN_INPUTS.with(|inputs| inputs.borrow_mut().now());
        let millis = u64::try_from(millis).unwrap_or_default();
        boa_engine::context::time::JsInstant::new(millis / 1000, (millis % 1000) as u32 * 1_000_000)
    }
}

/// Runs promise jobs in order. Unlike Boa's own executor it never reads the clock (it has no
/// timers to check: the sandbox has no `setTimeout`), so every clock reading a journal keeps
/// is one the script made.
#[derive(Default)]
pub(super) struct ScriptJobs {
    promise: RefCell<std::collections::VecDeque<boa_engine::job::PromiseJob>>,
    generic: RefCell<std::collections::VecDeque<boa_engine::job::GenericJob>>,
    /// The engine's own futures (e.g. a dynamic `import()` failing): run to the end in turn.
    native: RefCell<std::collections::VecDeque<boa_engine::job::NativeAsyncJob>>,
}

impl boa_engine::job::JobExecutor for ScriptJobs {
    fn enqueue_job(self: std::rc::Rc<Self>, job: boa_engine::job::Job, _context: &mut Context) {
        match job {
            boa_engine::job::Job::PromiseJob(job) => self.promise.borrow_mut().push_back(job),
            boa_engine::job::Job::GenericJob(job) => self.generic.borrow_mut().push_back(job),
            boa_engine::job::Job::AsyncJob(job) => self.native.borrow_mut().push_back(job),
            // Timers: nothing in the sandbox sets one, and nothing could wait for it.
            _ => {}
        }
    }

    fn run_jobs(self: std::rc::Rc<Self>, context: &mut Context) -> JsResult<()> {
        loop {
            let native = self.native.borrow_mut().pop_front();
            let result = if let Some(job) = native {
                let context = RefCell::new(&mut *context);
                futures::executor::block_on(job.call(&context))
            } else {
                let promise = self.promise.borrow_mut().pop_front();
                match promise {
                    Some(job) => job.call(context),
                    None => match self.generic.borrow_mut().pop_front() {
                        Some(job) => job.call(context),
                        None => break,
                    },
                }
            };
            if let Err(error) = result {
                self.promise.borrow_mut().clear();
                self.generic.borrow_mut().clear();
                self.native.borrow_mut().clear();
                return Err(error);
            }
        }
        context.clear_kept_objects();
        Ok(())
    }
}

/// Replaces the engine's `Math.random` with one drawn from [`RunInputs`].
pub(super) fn seeded_math_random(context: &mut Context) -> JsResult<()> {
    let math = context
        .global_object()
        .get(js_string!("Math"), context)?
        .as_object()
        .ok_or_else(|| JsNativeError::typ().with_message("Math is missing"))?;
    let random = FunctionObjectBuilder::new(
        context.realm(),
        NativeFunction::from_fn_ptr(|_, _, _| {
            Ok(JsValue::from(
                RUN_INPUTS.with(|inputs| inputs.borrow_mut().next_random()),
            ))
        }),
    )
    .name(js_string!("random"))
    .length(0)
    .build();
    math.define_property_or_throw(
        js_string!("random"),
        PropertyDescriptor::builder()
            .value(random)
            .writable(true)
            .enumerable(false)
            .configurable(true),
        context,
    )?;
    Ok(())
}
