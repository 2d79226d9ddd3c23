"""BFCL's side of `cargo xtask eval --suite bfcl`: its tasks, and its own checkers, unchanged.

BFCL v4 ships its tasks, simulated APIs and checkers in the `bfcl-eval` package on PyPI,
installed with --no-deps (its full dependency list pulls provider SDKs, faiss and
sentence-transformers that no checker used here imports). Two subcommands, both printing JSON:

  python3 driver.py tasks --category simple_python --limit 3
      one line per task: {"id", "turns": [message, ...]}
  python3 driver.py score --category simple_python --id simple_python_0 --run-dir DIR
      scores the calls `server.py` recorded in DIR/calls.jsonl: {"valid", "errorType", "error", "calls"}
  python3 driver.py selfcheck --category multiple --limit 5
      scores BFCL's ground truth (must pass) and no calls (must fail): {"tasks", "problems"}

The AST checker (simple_python, multiple, parallel, parallel_multiple) and the multi-turn
checker (multi_turn_base: the simulated APIs' state and the calls' results, against BFCL's
ground truth executed on fresh instances) are called exactly as BFCL's eval runner calls them.
"""

import argparse
import copy
import json
import sys
import types
from pathlib import Path

# The name BFCL's checkers are given for the model. It keys the simulated API instances of a
# multi-turn check and the model registry the AST checker consults (see `install_model_registry`).
MODEL_NAME = "agentic"

AST_CATEGORIES = ["simple_python", "multiple", "parallel", "parallel_multiple"]
MULTI_TURN_CATEGORIES = ["multi_turn_base"]
CATEGORIES = AST_CATEGORIES + MULTI_TURN_CATEGORIES


def install_model_registry():
    """Puts a one-model registry where BFCL's model registry module would be.

    `bfcl_eval.constants.model_config` builds BFCL's table of every model it can run, and to
    do so imports a handler per provider, each importing that provider's SDK. The AST checker
    reads one flag from it, for the model it is given: whether the model's function names had
    their dots turned into underscores (`underscore_to_dot`). agentic's calls are recorded
    under the names BFCL gave them, dots included, so the flag is false. The checker itself
    is imported and called unchanged.
    """
    if "bfcl_eval.constants.model_config" in sys.modules:
        return
    registry = types.ModuleType("bfcl_eval.constants.model_config")
    registry.MODEL_CONFIG_MAPPING = {
        MODEL_NAME: types.SimpleNamespace(model_name=MODEL_NAME, underscore_to_dot=False)
    }
    sys.modules["bfcl_eval.constants.model_config"] = registry


def load_entries(category):
    """BFCL's tasks of a category, as its own generation step loads them (function docs with
    its language hint; multi-turn tasks with their classes' function docs)."""
    from bfcl_eval.utils import load_dataset_entry

    return load_dataset_entry(category)


def load_entry(category, task_id):
    for entry in load_entries(category):
        if entry["id"] == task_id:
            return entry
    raise SystemExit(f"no task {task_id} in {category}")


def load_ground_truth(category, task_id):
    from bfcl_eval.constants.eval_config import POSSIBLE_ANSWER_PATH
    from bfcl_eval.utils import load_file

    for answer in load_file(POSSIBLE_ANSWER_PATH / f"BFCL_v4_{category}.json"):
        if answer["id"] == task_id:
            return answer["ground_truth"]
    raise SystemExit(f"no ground truth for {task_id}")


def turn_messages(entry):
    """The user's message of each turn (a turn's user messages joined)."""
    turns = []
    for turn in entry["question"]:
        texts = [message["content"] for message in turn if message.get("role") == "user"]
        turns.append("\n".join(texts))
    return turns


def read_calls(run_dir):
    """The calls `server.py` recorded, in order: {"turn", "name", "arguments"}."""
    path = Path(run_dir) / "calls.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def call_string(name, arguments):
    """A call in the Python syntax BFCL's multi-turn checker executes: `cd(folder='document')`."""
    return f"{name}({', '.join(f'{key}={value!r}' for key, value in arguments.items())})"


def score(category, task_id, run_dir):
    entry = load_entry(category, task_id)
    ground_truth = load_ground_truth(category, task_id)
    calls = read_calls(run_dir)
    if category in AST_CATEGORIES:
        result = score_ast(category, entry, ground_truth, calls)
    else:
        result = score_multi_turn(category, entry, ground_truth, calls)
    errors = result.get("error") or result.get("error_message") or []
    if isinstance(errors, str):
        errors = [errors]
    valid = bool(result["valid"])
    return {
        "valid": valid,
        "errorType": "" if valid else result.get("error_type", ""),
        "error": "; ".join(str(error) for error in errors),
        "calls": len(calls),
    }


def score_ast(category, entry, ground_truth, calls):
    """The prompt's calls are judged as one response of the model, each distinct call once.

    BFCL's single-turn categories judge one model response; agentic shows the model the
    results and lets it go on, and a small model often makes the same call again after
    seeing its result. That repeat is not a second request, so a call identical to an
    earlier one (name and arguments) is left out; any other extra call counts (for
    `simple_python`, a wrong count)."""
    install_model_registry()
    from bfcl_eval.constants.enums import Language
    from bfcl_eval.eval_checker.ast_eval.ast_checker import ast_checker

    model_output = []
    for call in calls:
        output = {call["name"]: call["arguments"]}
        if output not in model_output:
            model_output.append(output)
    return ast_checker(
        entry["function"], model_output, ground_truth, Language.PYTHON, category, MODEL_NAME
    )


def score_multi_turn(category, entry, ground_truth, calls):
    """Each call is a step of its turn (BFCL executes a turn's steps one after another, so
    how calls group into steps does not change the outcome)."""
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import multi_turn_checker

    decoded = [[] for _ in ground_truth]
    for call in calls:
        turn = call["turn"]
        if 0 <= turn < len(decoded):
            decoded[turn].append([call_string(call["name"], call["arguments"])])
    return multi_turn_checker(decoded, ground_truth, copy.deepcopy(entry), category, MODEL_NAME)


def ground_truth_calls(category, entry, ground_truth):
    """BFCL's ground truth as the calls a perfect model would make, for `selfcheck`."""
    import ast

    if category in AST_CATEGORIES:
        calls = []
        for item in ground_truth:
            ((name, parameters),) = item.items()
            arguments = {}
            for key, options in parameters.items():
                if options[0] != "":
                    arguments[key] = first_option(options[0])
            calls.append({"turn": 0, "name": name, "arguments": arguments})
        return calls
    docs = {function["name"]: function for function in entry["function"]}
    calls = []
    for turn, strings in enumerate(ground_truth):
        for string in strings:
            node = ast.parse(string, mode="eval").body
            name = node.func.id
            names = list(docs[name]["parameters"]["properties"])
            arguments = {names[i]: ast.literal_eval(arg) for i, arg in enumerate(node.args)}
            arguments.update({kw.arg: ast.literal_eval(kw.value) for kw in node.keywords})
            calls.append({"turn": turn, "name": name, "arguments": arguments})
    return calls


def first_option(value):
    """A possible answer's first acceptable value, nested dicts' options included."""
    if isinstance(value, dict):
        return {key: first_option(options[0]) for key, options in value.items() if options[0] != ""}
    if isinstance(value, list):
        return [first_option(item) for item in value]
    return value


def selfcheck(category, limit):
    """Scores BFCL's own ground truth, and no calls at all, for the first `limit` tasks: the
    first must pass and the second fail, or the harness misreads BFCL. Prints the failures."""
    import tempfile

    problems = []
    entries = load_entries(category)[:limit]
    for entry in entries:
        ground_truth = load_ground_truth(category, entry["id"])
        for calls, expected in [(ground_truth_calls(category, entry, ground_truth), True), ([], False)]:
            with tempfile.TemporaryDirectory() as run_dir:
                path = Path(run_dir) / "calls.jsonl"
                path.write_text("".join(json.dumps(call) + "\n" for call in calls))
                result = score(category, entry["id"], run_dir)
            if result["valid"] != expected:
                problems.append({"id": entry["id"], "calls": len(calls), "score": result})
    return {"tasks": len(entries), "problems": problems}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    tasks = commands.add_parser("tasks")
    tasks.add_argument("--category", required=True, choices=CATEGORIES)
    tasks.add_argument("--limit", type=int, default=0, help="the first N tasks; 0: all")
    scoring = commands.add_parser("score")
    scoring.add_argument("--category", required=True, choices=CATEGORIES)
    scoring.add_argument("--id", required=True)
    scoring.add_argument("--run-dir", required=True)
    check = commands.add_parser("selfcheck")
    check.add_argument("--category", required=True, choices=CATEGORIES)
    check.add_argument("--limit", type=int, default=5)
    args = parser.parse_args()
    if args.command == "selfcheck":
        print(json.dumps(selfcheck(args.category, args.limit)))
    elif args.command == "tasks":
        entries = load_entries(args.category)
        if args.limit > 0:
            entries = entries[: args.limit]
        for entry in entries:
            print(json.dumps({"id": entry["id"], "turns": turn_messages(entry)}))
    else:
        print(json.dumps(score(args.category, args.id, args.run_dir)))


if __name__ == "__main__":
    main()
