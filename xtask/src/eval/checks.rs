//! Judging a run: what its answer states, and what its tools left behind.

use super::*;

/// The problems with the answer text (empty when it passes).
pub(crate) fn check_answer(check: &Check, answer: &str) -> Vec<String> {
    let lower = answer.to_lowercase();
    let mut problems = Vec::new();
    for wanted in &check.answer_contains {
        if !lower.contains(&wanted.to_lowercase()) {
            problems.push(format!("the answer does not say \"{wanted}\""));
        }
    }
    if !check.answer_any.is_empty()
        && !check
            .answer_any
            .iter()
            .any(|wanted| lower.contains(&wanted.to_lowercase()))
    {
        problems.push(format!(
            "the answer says none of {}",
            check.answer_any.join(", ")
        ));
    }
    let numbers = numbers_in(answer);
    for wanted in &check.answer_numbers {
        if !numbers
            .iter()
            .any(|(value, decimals)| number_matches(*wanted, *value, *decimals))
        {
            problems.push(format!("the answer does not state {wanted}"));
        }
    }
    for unwanted in &check.answer_excludes {
        if lower.contains(&unwanted.to_lowercase()) {
            problems.push(format!("the answer says \"{unwanted}\""));
        }
    }
    if let Some(zone) = &check.answer_weekday_in {
        problems.extend(weekday_problem(zone, &lower, chrono::Utc::now()));
    }
    problems
}

/// Whether `answer` (lowercase) names the weekday in `zone` at `now`, or ten minutes before
/// (a run that crossed midnight), and no other weekday.
pub(super) fn weekday_problem(
    zone: &str,
    answer: &str,
    now: chrono::DateTime<chrono::Utc>,
) -> Option<String> {
    const WEEKDAYS: [&str; 7] = [
        "monday",
        "tuesday",
        "wednesday",
        "thursday",
        "friday",
        "saturday",
        "sunday",
    ];
    let Ok(tz) = zone.parse::<chrono_tz::Tz>() else {
        return Some(format!("answer_weekday_in names no timezone: \"{zone}\""));
    };
    let today: Vec<String> = [now, now - chrono::Duration::minutes(10)]
        .iter()
        .map(|at| {
            at.with_timezone(&tz)
                .format("%A")
                .to_string()
                .to_lowercase()
        })
        .collect();
    let named: Vec<&str> = WEEKDAYS
        .iter()
        .copied()
        .filter(|day| answer.contains(day))
        .collect();
    let right = !named.is_empty() && named.iter().all(|day| today.iter().any(|t| t == day));
    (!right).then(|| {
        format!(
            "the answer does not name the weekday in {zone} ({})",
            today[0]
        )
    })
}

/// Whether `found` (written with `decimals` digits after the point) states `wanted`: equal, or
/// more precise and rounding to it (21.33 states 21.3).
pub(super) fn number_matches(wanted: f64, found: f64, decimals: usize) -> bool {
    if (wanted - found).abs() <= 1e-9 * wanted.abs().max(1.0) {
        return true;
    }
    let wanted_decimals = decimals_of(wanted);
    if decimals <= wanted_decimals {
        return false;
    }
    let scale = 10f64.powi(wanted_decimals as i32);
    ((found * scale).round() - (wanted * scale).round()).abs() < 0.5
}

pub(super) fn decimals_of(value: f64) -> usize {
    let text = format!("{value}");
    text.split_once('.')
        .map_or(0, |(_, fraction)| fraction.len())
}

/// The numbers in a text with how many decimals each was written with: `1,234.50` is 1234.5
/// (2 decimals); a `-` is a sign only where it does not follow a letter or digit.
pub(crate) fn numbers_in(text: &str) -> Vec<(f64, usize)> {
    let chars: Vec<char> = text.chars().collect();
    let mut numbers = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let starts_number = chars[i].is_ascii_digit()
            && (i == 0 || !(chars[i - 1].is_ascii_digit() || chars[i - 1] == '.'));
        if !starts_number {
            i += 1;
            continue;
        }
        let negative = i > 0 && chars[i - 1] == '-' && (i < 2 || !chars[i - 2].is_alphanumeric());
        let mut digits = String::new();
        let mut decimals = None::<usize>;
        while i < chars.len() {
            let c = chars[i];
            let next_is_digit = chars.get(i + 1).is_some_and(char::is_ascii_digit);
            if c.is_ascii_digit() {
                digits.push(c);
                if let Some(count) = decimals.as_mut() {
                    *count += 1;
                }
            } else if c == ',' && decimals.is_none() && next_is_digit {
                // A thousands separator only when three digits follow.
                let three = chars[i + 1..]
                    .iter()
                    .take_while(|d| d.is_ascii_digit())
                    .count()
                    == 3;
                if !three {
                    break;
                }
            } else if c == '.' && decimals.is_none() && next_is_digit {
                digits.push('.');
                decimals = Some(0);
            } else {
                break;
            }
            i += 1;
        }
        if let Ok(value) = digits.parse::<f64>() {
            numbers.push((if negative { -value } else { value }, decimals.unwrap_or(0)));
        }
    }
    numbers
}

pub(super) fn check_state(
    check: &Check,
    root: &Path,
    agentic: &Agentic<'_>,
) -> anyhow::Result<Vec<String>> {
    let mut problems = Vec::new();
    for file in &check.files {
        match std::fs::read_to_string(root.join(&file.path)) {
            Err(_) => problems.push(format!("{} was not written", file.path)),
            Ok(text) => {
                let lower = text.to_lowercase();
                for wanted in &file.contains {
                    if !lower.contains(&wanted.to_lowercase()) {
                        problems.push(format!("{} does not contain \"{wanted}\"", file.path));
                    }
                }
                for unwanted in &file.excludes {
                    if lower.contains(&unwanted.to_lowercase()) {
                        problems.push(format!("{} contains \"{unwanted}\"", file.path));
                    }
                }
            }
        }
    }
    for path in &check.absent {
        if root.join(path).exists() {
            problems.push(format!("{path} exists"));
        }
    }
    for invoke in &check.invoke {
        let output = match agentic.invoke(invoke) {
            Ok(output) => output.to_lowercase(),
            Err(error) => {
                problems.push(format!("{error:#}"));
                continue;
            }
        };
        for wanted in &invoke.contains {
            if !output.contains(&wanted.to_lowercase()) {
                problems.push(format!("{} does not show \"{wanted}\"", invoke.tool));
            }
        }
        for unwanted in &invoke.excludes {
            if output.contains(&unwanted.to_lowercase()) {
                problems.push(format!("{} shows \"{unwanted}\"", invoke.tool));
            }
        }
    }
    Ok(problems)
}
