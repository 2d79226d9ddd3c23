//! The report: per split, kind and task, in Markdown.

use super::*;

/// Per task kind and mode: successes out of runs, and medians.
pub(crate) fn summary(reports: &[RunReport], modes: &[String]) -> String {
    let mut text = String::new();
    let median = |mut values: Vec<u64>| -> u64 {
        if values.is_empty() {
            return 0;
        }
        values.sort_unstable();
        values[values.len() / 2]
    };
    text.push_str("| tasks | mode | success | model calls (median) | prompt tokens (median) | completion tokens (median) | wall s (median) | unparsed / undefined calls / unknown fields |\n");
    text.push_str("| --- | --- | --- | --- | --- | --- | --- | --- |\n");
    // All, then each split (tuning and held-out apart, always), then each kind.
    type Member = Box<dyn Fn(&RunReport) -> bool>;
    let mut groups: Vec<(&str, Member)> = vec![("all", Box::new(|_: &RunReport| true))];
    for split in [Split::Tuning, Split::Heldout] {
        groups.push((
            split.name(),
            Box::new(move |report: &RunReport| report.split == split),
        ));
    }
    let mut seen: Vec<Kind> = reports.iter().map(|report| report.kind).collect();
    seen.sort();
    seen.dedup();
    for kind in seen {
        groups.push((
            kind.name(),
            Box::new(move |report: &RunReport| report.kind == kind),
        ));
    }
    for (name, member) in &groups {
        for mode in modes {
            let runs: Vec<&RunReport> = reports
                .iter()
                .filter(|report| &report.mode == mode && member(report))
                .collect();
            if runs.is_empty() {
                continue;
            }
            let ok = runs.iter().filter(|report| report.success).count();
            text.push_str(&format!(
                "| {name} | {mode} | {ok}/{} ({:.0}%) | {} | {} | {} | {:.1} | {} / {} / {} |\n",
                runs.len(),
                100.0 * ok as f64 / runs.len() as f64,
                median(runs.iter().map(|r| r.model_calls).collect()),
                median(runs.iter().map(|r| r.prompt_tokens).collect()),
                median(runs.iter().map(|r| r.completion_tokens).collect()),
                median(runs.iter().map(|r| r.wall_ms).collect()) as f64 / 1000.0,
                runs.iter().map(|r| r.mistakes.unparsed).sum::<u64>(),
                runs.iter().map(|r| r.mistakes.undefined_calls).sum::<u64>(),
                runs.iter().map(|r| r.mistakes.unknown_fields).sum::<u64>(),
            ));
        }
    }
    text.push_str("\n| task | mode | result | model calls | prompt tokens | iterations | tool calls | wall s | failure |\n");
    text.push_str("| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
    let mut by_task: BTreeMap<(&str, &str), Vec<&RunReport>> = BTreeMap::new();
    for report in reports {
        by_task
            .entry((&report.task, &report.mode))
            .or_default()
            .push(report);
    }
    for ((task, mode), runs) in by_task {
        let ok = runs.iter().filter(|report| report.success).count();
        let failures: Vec<String> = runs
            .iter()
            .filter(|report| !report.success)
            .map(|report| format!("{}: {}", report.failure, one_line(&report.detail, 60)))
            .collect();
        text.push_str(&format!(
            "| {task} | {mode} | {ok}/{} | {} | {} | {} | {} | {:.1} | {} |\n",
            runs.len(),
            median(runs.iter().map(|r| r.model_calls).collect()),
            median(runs.iter().map(|r| r.prompt_tokens).collect()),
            median(runs.iter().map(|r| r.iterations).collect()),
            median(runs.iter().map(|r| r.tool_calls).collect()),
            median(runs.iter().map(|r| r.wall_ms).collect()) as f64 / 1000.0,
            failures.join("; ").replace('|', "\\|"),
        ));
    }
    text
}
