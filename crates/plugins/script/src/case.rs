//! A timeline case: one prompt played with scripted model turns, as YAML writes it. Cases are
//! written by hand or exported from a real run (`agentic export <prompt> --test <file>`), in
//! which case they also hold what every tool call returned, so that a replay runs no tool.

use agentic_core::replay::RecordedCall;
use agentic_core::{ModelKind, PromptState};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::Turn;

/// One scenario, usually read from a YAML file next to the test.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TimelineCase {
    /// What the case shows, for the reader; not used otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Earlier prompts of the same conversation, run first; their timelines become history.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<HistoryPrompt>,
    pub input: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    #[serde(default)]
    pub model: ModelKind,
    /// Runtime config (top-level keys and plugin sections).
    #[serde(default)]
    pub config: Map<String, Value>,
    /// Overrides the mode's round limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_rounds: Option<u32>,
    /// Answers to approval requests, in the order they are asked.
    #[serde(default, skip_serializing_if = "Vec::is_empty", with = "yaml_verdicts")]
    pub decisions: Vec<CaseDecision>,
    /// What the case says it shows, checked before the snapshot is compared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect: Option<Expect>,
    /// The model's turns, for the history prompts first and then this one.
    pub turns: Vec<Turn>,
    /// The scripted model plays one that samples ([`agentic_core::ModelProvider::samples`]):
    /// a mode may ask it again for another answer, which is the next turn.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub samples: bool,
    /// What a recorded run's tools returned: a case that has it replays every tool call from
    /// it instead of running the tool, and answers approval requests as the run did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recorded: Option<Recording>,
    /// Tools that run for real in a replay (`fs.*`, `time.now`, `*`), to check a changed
    /// plugin against the model's recorded behaviour.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub live: Vec<String>,
}

/// What a run did besides the model's turns.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Recording {
    /// Where the case came from: the prompt's id, when and how it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// Every tool call that ran (or was rejected), in order, with what it returned.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub calls: Vec<RecordedCall>,
    /// What the mode journaled besides the model's replies (code mode: each script's seed
    /// and the times `Date` read), so the replay reads the same.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub journal: Vec<Value>,
}

impl TimelineCase {
    /// A case as its YAML file writes it.
    pub fn from_yaml(text: &str) -> anyhow::Result<Self> {
        Ok(serde_yaml_ng::from_str(text)?)
    }

    /// The case as a YAML file.
    pub fn to_yaml(&self) -> anyhow::Result<String> {
        Ok(serde_yaml_ng::to_string(self)?)
    }

    /// Puts `code` in place of the case's `program`-th program, counted from 1 over the turns
    /// that hold code: how an edited program is tried against a recording. A recorded case
    /// then answers approval requests from its recording, call by call, instead of its
    /// `decisions` in order: the edited program may ask for other calls, or in another order.
    pub fn swap_program(&mut self, program: usize, code: String) -> anyhow::Result<()> {
        let programs = self.turns.iter().filter(|turn| turn.code.is_some()).count();
        if programs == 0 {
            anyhow::bail!("the case has no program to replace: only code-mode cases have them");
        }
        if program == 0 || program > programs {
            anyhow::bail!("there is no program {program}: the case has programs 1 to {programs}");
        }
        if let Some(turn) = self
            .turns
            .iter_mut()
            .filter(|turn| turn.code.is_some())
            .nth(program - 1)
        {
            turn.code = Some(code);
        }
        if self.recorded.is_some() {
            self.decisions.clear();
        }
        Ok(())
    }

    /// The replay of this case's recording, if it has one.
    pub fn replay(&self) -> Option<agentic_core::replay::Replay> {
        let recorded = self.recorded.as_ref()?;
        Some(agentic_core::replay::Replay::new(
            recorded.calls.clone(),
            self.live.clone(),
            recorded.journal.clone(),
        ))
    }
}

/// How a case must end: checked by the runner, so a snapshot accepted by mistake cannot
/// contradict the case's own description.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Expect {
    /// The prompt's final state (`completed`, `failed`, `waiting_for_approval`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<PromptState>,
    /// The rules' notices of the turn's tool errors, in order (`repeated`, `afresh`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notices: Option<Vec<String>>,
    /// Words the last text shown to the user contains.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
}

impl Expect {
    /// What of this `prompt` differs from the expectation, if anything.
    pub fn check(&self, prompt: &agentic_core::Prompt) -> anyhow::Result<()> {
        if let Some(state) = self.state {
            anyhow::ensure!(
                prompt.state == state,
                "the case expects the prompt {}, but it ended {} ({:?})",
                state.as_str(),
                prompt.state.as_str(),
                prompt.error
            );
        }
        if let Some(notices) = &self.notices {
            let found: Vec<&str> = prompt
                .output
                .iter()
                .filter_map(|output| match output {
                    agentic_core::PromptOutput::Tool(tool) => tool.result.notice(),
                    _ => None,
                })
                .collect();
            anyhow::ensure!(
                found == *notices,
                "the case expects the notices {notices:?}, but the turn has {found:?}"
            );
        }
        if let Some(answer) = &self.answer {
            let last = prompt.output.iter().rev().find_map(|output| match output {
                agentic_core::PromptOutput::Text(text) => Some(text.content.as_str()),
                _ => None,
            });
            anyhow::ensure!(
                last.is_some_and(|text| text.contains(answer.as_str())),
                "the case expects the last text to say {answer:?}, but it is {last:?}"
            );
        }
        Ok(())
    }
}

/// One of a case's decisions: the verdict, the scope it grants, and the rule that took it
/// when no person did.
#[derive(Debug, Clone, PartialEq)]
pub struct CaseDecision {
    pub verdict: agentic_core::Verdict,
    /// The approval reaches the tool's later calls too (`approve: { reach: prompt }`).
    pub scope: Option<agentic_core::scope::Scope>,
    /// Taken by `[approval] timeout`, with this limit as written (`timeout: 10m`), not by a
    /// person: the rejection the limit gives.
    pub timeout: Option<String>,
}

/// A plain decision, as people take them: the verdict alone.
impl PartialEq<agentic_core::Verdict> for CaseDecision {
    fn eq(&self, verdict: &agentic_core::Verdict) -> bool {
        self.verdict == *verdict && self.scope.is_none() && self.timeout.is_none()
    }
}

impl From<agentic_core::Verdict> for CaseDecision {
    fn from(verdict: agentic_core::Verdict) -> Self {
        Self {
            verdict,
            scope: None,
            timeout: None,
        }
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HistoryPrompt {
    pub input: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
}

/// A case's decisions as YAML writes them: `approve`, `reject`, `reject: <reason>`, for a
/// plan `approveOnly: [0, 2]` (with `reason:` for the calls left out), an approval with a
/// scope `approve: { reach: prompt }`, and `timeout: 10m` for the rejection
/// `[approval] timeout` gives a call nobody decided.
mod yaml_verdicts {
    use agentic_core::Verdict;
    use agentic_core::scope::Scope;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use super::CaseDecision;

    #[derive(Serialize, Deserialize)]
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    struct Only {
        approve_only: Vec<usize>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    }

    #[derive(Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Scoped {
        approve: Scope,
    }

    #[derive(Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Timeout {
        timeout: String,
    }

    #[derive(Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Reject {
        reject: Option<String>,
    }

    #[derive(Serialize, Deserialize)]
    #[serde(untagged)]
    enum Written {
        Word(String),
        Only(Only),
        Scoped(Scoped),
        Timeout(Timeout),
        Reject(Reject),
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Vec<CaseDecision>, D::Error> {
        Vec::<Written>::deserialize(deserializer)?
            .into_iter()
            .map(|written| match written {
                Written::Word(word) if word == "approve" => Ok(Verdict::Approve.into()),
                Written::Word(word) if word == "reject" => {
                    Ok(Verdict::Reject { reason: None }.into())
                }
                Written::Word(word) => Err(serde::de::Error::custom(format!(
                    "unknown decision \"{word}\", expected approve, reject, reject: <reason>, \
                     approveOnly: [..], approve: {{ reach: .. }} or timeout: <limit>"
                ))),
                Written::Reject(Reject { reject }) => Ok(Verdict::Reject { reason: reject }.into()),
                Written::Only(Only {
                    approve_only,
                    reason,
                }) => Ok(Verdict::ApproveOnly {
                    calls: approve_only,
                    reason,
                }
                .into()),
                Written::Scoped(Scoped { approve }) => Ok(CaseDecision {
                    verdict: Verdict::Approve,
                    scope: Some(approve),
                    timeout: None,
                }),
                Written::Timeout(Timeout { timeout }) => Ok(CaseDecision {
                    verdict: agentic_core::mode::timed_out(&timeout),
                    scope: None,
                    timeout: Some(timeout),
                }),
            })
            .collect()
    }

    pub(super) fn serialize<S: Serializer>(
        decisions: &[CaseDecision],
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        decisions
            .iter()
            .map(|decision| match (&decision.verdict, &decision.scope) {
                _ if decision.timeout.is_some() => Written::Timeout(Timeout {
                    timeout: decision.timeout.clone().unwrap_or_default(),
                }),
                (Verdict::Approve, Some(scope)) => Written::Scoped(Scoped {
                    approve: scope.clone(),
                }),
                (Verdict::Approve, None) => Written::Word("approve".to_owned()),
                (Verdict::Reject { reason }, _) => Written::Reject(Reject {
                    reject: reason.clone(),
                }),
                (Verdict::ApproveOnly { calls, reason }, _) => Written::Only(Only {
                    approve_only: calls.clone(),
                    reason: reason.clone(),
                }),
            })
            .collect::<Vec<_>>()
            .serialize(serializer)
    }
}
