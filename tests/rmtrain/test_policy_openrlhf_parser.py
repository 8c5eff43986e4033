"""The PPO plan (rmtrain.policy.openrlhf) against OpenRLHF 0.11.2's own source, not a copied flag list.

Where the source comes from: ``pip download`` of the pinned wheel (``--require-hashes``, a fixed
platform and Python tag, so the same bytes on any machine; OpenRLHF publishes wheels only), unpacked
under the session's tmp dir. Nothing is installed and nothing of OpenRLHF is imported: its modules
pull in ray, vLLM and DeepSpeed. Instead, ``openrlhf/cli/train_ppo_ray.py``'s ``__main__`` block is
read with ``ast`` and run as written -- the parser it builds, ``hierarchize``, and every check it
makes before ``train(args)`` -- with ``parse_args()`` given our command line and ``train``
capturing the arguments. PyPI through pip is the one network access CI has; without it (or with
``MATCHRM_OPENRLHF_WHEEL`` pointing at a copy of the wheel) the tests skip, saying why.

Then the arguments are used the way OpenRLHF uses them: peft's ``LoraConfig`` is built from the
keyword expressions of the ``LoraConfig(...)`` call in ``models/actor.py`` (and ``models/model.py``
for the critic), with the values ``trainer/ray/ppo_actor.py`` (``ppo_critic.py``) passes, on a tiny
causal LM; the W&B logger condition is the expression in ``trainer/ppo_trainer.py``; the GPUs each
layout asks Ray for are counted by following ``train()``'s placement groups."""

from __future__ import annotations

import ast
import contextlib
import hashlib
import importlib.util
import io
import json
import os
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from rmcore.errors import ConfigError
from rmtrain.policy.config import RayLayout, load_policy_config
from tests.support import ROOT

pytestmark = pytest.mark.usefixtures("one_torch_thread")
VERSION = "0.11.2"
WHEEL = f"openrlhf-{VERSION}-cp311-cp311-manylinux1_x86_64.whl"
SHA256 = "c969d70db03a70724c3d8a5a01186c6e0728bce624fb3dff95e39b5396acefa6"


@pytest.fixture(scope="session")
def openrlhf_src(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The unpacked ``openrlhf`` package of the pinned wheel."""
    d = tmp_path_factory.mktemp("openrlhf")
    wheel = Path(os.environ["MATCHRM_OPENRLHF_WHEEL"]) if os.environ.get("MATCHRM_OPENRLHF_WHEEL") else d / WHEEL
    if not wheel.exists():
        req = d / "requirements.txt"
        req.write_text(f"openrlhf=={VERSION} --hash=sha256:{SHA256}\n")
        r = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--require-hashes", "-r", str(req),
                            "--only-binary=:all:", "--python-version", "3.11", "--platform", "manylinux1_x86_64",
                            "-d", str(d), "-q"], capture_output=True, text=True, timeout=600)
        if r.returncode or not wheel.exists():
            last = (r.stderr.strip().splitlines() or ["no output"])[-1]
            pytest.skip(f"OpenRLHF {VERSION} wheel not downloadable ({last}); set MATCHRM_OPENRLHF_WHEEL to a copy")
    assert hashlib.sha256(wheel.read_bytes()).hexdigest() == SHA256, f"{wheel} is not OpenRLHF {VERSION}'s wheel"
    with zipfile.ZipFile(wheel) as z:
        for name in z.namelist():
            if "/openrlhf/" in name and name.endswith(".py"):
                z.extract(name, d / "src")
    return next((d / "src").rglob("openrlhf/cli/train_ppo_ray.py")).parents[1]


def _load_module(path: Path, name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class _ParseArgsWithArgv(ast.NodeTransformer):
    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.func, ast.Attribute) and node.func.attr == "parse_args" and not node.args:
            node.args = [ast.Name("ARGV", ast.Load())]
        return node

    def visit_ImportFrom(self, node: ast.ImportFrom) -> ast.AST | None:
        return None if node.module == "openrlhf.utils.config" else node  # hierarchize is given, loaded by path


@pytest.fixture(scope="session")
def train_ppo_main(openrlhf_src: Path) -> Callable[[list[str]], tuple[SimpleNamespace, Any]]:
    """argv -> (the args train_ppo_ray's main block passes to train(), its parser)."""
    path = openrlhf_src / "cli" / "train_ppo_ray.py"
    tree = ast.parse(path.read_text())
    main = next(n for n in tree.body if isinstance(n, ast.If) and "__main__" in ast.unparse(n.test))
    stdlib = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))
              and (n.module if isinstance(n, ast.ImportFrom) else n.names[0].name).split(".")[0]
              in ("argparse", "os", "datetime")]
    module = ast.fix_missing_locations(_ParseArgsWithArgv().visit(ast.Module(body=stdlib + main.body, type_ignores=[])))
    code = compile(module, str(path), "exec")
    hierarchize = _load_module(openrlhf_src / "utils" / "config.py", "openrlhf_config").hierarchize

    def run(argv: list[str]) -> tuple[SimpleNamespace, Any]:
        captured: dict[str, Any] = {}
        ns = {"ARGV": argv, "hierarchize": hierarchize, "train": lambda a: captured.setdefault("args", a)}
        err = io.StringIO()
        try:
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
                exec(code, ns)
        except SystemExit:
            raise AssertionError(f"OpenRLHF {VERSION}'s parser rejects the command: {err.getvalue().strip()}") from None
        return captured["args"], ns["parser"]

    return run


def _call(source: Path, func: str, inside: str | None = None) -> ast.Call:
    """The first call of ``func`` in ``source`` (inside the function ``inside`` when given)."""
    tree = ast.parse(source.read_text())
    if inside:
        tree = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == inside)
    return next(n for n in ast.walk(tree) if isinstance(n, ast.Call) and ast.unparse(n.func) == func)


def openrlhf_lora_config(src: Path, args: SimpleNamespace, role: str) -> Any:
    """peft's LoraConfig as OpenRLHF builds it for the actor (models/actor.py, from ppo_actor.py's
    Actor(...) arguments) or the critic (models/model.py, from ppo_critic.py's call)."""
    import peft

    if role == "actor":
        build, caller = (_call(src / "models" / "actor.py", "LoraConfig"),
                         _call(src / "trainer/ray/ppo_actor.py", "Actor"))
    else:
        build = _call(src / "models" / "model.py", "LoraConfig")
        caller = _call(src / "trainer/ray/ppo_critic.py", "get_llm_for_sequence_regression")
    passed = {k.arg: k.value for k in caller.keywords}
    env = {"strategy": SimpleNamespace(args=args), "TaskType": peft.TaskType}
    kwargs = {}
    for kw in build.keywords:
        expr = passed[kw.value.id] if isinstance(kw.value, ast.Name) and kw.value.id in passed else kw.value
        kwargs[kw.arg] = eval(compile(ast.Expression(expr), "openrlhf", "eval"), env)
    return peft.LoraConfig(**kwargs)


def wandb_logger_created(src: Path, args: SimpleNamespace) -> bool:
    """The condition under which ppo_trainer.py creates its WandbLogger, evaluated on ``args``."""
    tree = ast.parse((src / "trainer" / "ppo_trainer.py").read_text())
    node = next(n for n in ast.walk(tree) if isinstance(n, ast.Assign)
                and ast.unparse(n.targets[0]) == "self.wandb_logger")
    assert isinstance(node.value, ast.IfExp) and "WandbLogger" in ast.unparse(node.value.body)
    return bool(eval(compile(ast.Expression(node.value.test), "ppo_trainer", "eval"),
                     {"self": SimpleNamespace(args=args)}))


def ray_gpus(a: SimpleNamespace) -> int:
    """Whole GPUs the placement groups and actors of train_ppo_ray.train(args) reserve: colocated
    groups share the actor's placement group (one bundle per GPU), vLLM engines share it under
    colocate_all, everything else gets its own (launcher.RayActorGroup, vllm_engine.create_vllm_engines)."""
    def world(role: str) -> int:
        r = getattr(a, role)
        return r.num_nodes * r.num_gpus_per_node

    shared = world("actor") if (a.train.colocate_actor_ref or a.train.colocate_all) else None
    total = shared or 0
    if a.vllm.num_engines:
        vllm = a.vllm.num_engines * a.vllm.tensor_parallel_size
        if a.train.colocate_all and not a.train.async_enable:
            assert world("actor") == vllm  # train()'s own assertion
        else:
            total += vllm
    if shared is None:
        total += world("actor") + (world("ref") if a.algo.kl.init_coef > 0 else 0)
    elif a.algo.kl.init_coef > 0:
        assert world("ref") == world("actor")
    if a.critic.model_name_or_path:
        if a.train.colocate_all:
            assert world("critic") <= shared
        else:
            total += world("critic")
    assert a.reward.remote_url, "the plan scores through the remote reward server, no reward group"
    return total


@pytest.fixture(scope="module")
def material(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from rmcore.data.loading import load_rating_set
    from rmcore.models.tiny import save_tiny, tiny_causal_lm, tiny_model

    rs = load_rating_set({"name": "simulated", "n_prompts": 20, "responses_per_prompt": 2, "seed": 0})
    texts = [m["content"] for p in rs.prompts for m in p.messages] + [r.text for p in rs.prompts for r in p.responses]
    root = tmp_path_factory.mktemp("ppo_material")
    policy = tiny_causal_lm(root / "policy", texts, "qwen2", vocab_size=300, pad_token="<|pad|>")
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(policy)
    rm = save_tiny(root / "rm01", tiny_model(tok, "qwen2", head="classifier", num_labels=1), tok)
    return {"policy": policy, "rm": rm, "root": root}


def ppo_plan(material: dict[str, Path], out: Path, **over: Any) -> dict[str, Any]:
    from rmtrain.policy.train import train_policy

    cfg = load_policy_config(ROOT / "recipes" / "policy_llama3_8b_ppo.yaml", {
        "environment": "perturbed", "output_dir": str(out), "heldout_prompts": 4,
        "data": {"name": "simulated", "n_prompts": 20, "responses_per_prompt": 2, "seed": 0}, **over})
    cfg.policy.name_or_path = str(material["policy"])  # no Hub here: the tiny chat policy
    cfg.reward_model = str(material["rm"])
    return train_policy(cfg)


@pytest.mark.parametrize("layout,gpus", [("colocated", 8), ("multi_node", 32)])
def test_plan_parses_with_openrlhf_and_fits_its_nodes(material: dict[str, Path], train_ppo_main: Callable,
                                                      openrlhf_src: Path, tmp_path: Path, layout: str,
                                                      gpus: int) -> None:
    plan = ppo_plan(material, tmp_path / "run", **{"openrlhf.layout": layout})
    cmd = plan["train_command"]
    assert cmd[1:3] == ["-m", "openrlhf.cli.train_ppo_ray"]
    args, _ = train_ppo_main(cmd[3:] + ["--logger.wandb.key", "from-the-environment"])
    # the study's settings, as OpenRLHF reads them
    assert args.actor.adam.lr == 5e-7 and args.critic.adam.lr == 1.5e-6
    assert args.rollout.n_samples_per_prompt == 16 and args.rollout.temperature == 0.8 and args.rollout.top_p == 0.9
    assert args.actor.max_norm == 0.8 and args.critic.max_norm == 0.8 and args.algo.advantage.gamma == 0.999
    assert args.train.max_epochs == 1 and args.algo.advantage.estimator == "gae"
    assert args.critic.model_name_or_path == str(material["policy"])  # gae: a critic from the policy
    assert plan["not_supported"]["repetition_penalty"]["value"] == 1.1
    assert args.reward.remote_url == ["http://127.0.0.1:5000/get_reward"]
    assert args.data.label_key == "label" and args.data.input_key == "messages" and args.data.apply_chat_template
    assert Path(args.data.prompt_dataset).is_file() and args.ckpt.load_enable and args.ckpt.save_steps == 5
    # W&B: project, group and run name from the recipe, and the key makes OpenRLHF create its logger
    assert (args.logger.wandb.project, args.logger.wandb.group) == ("matchrm-policy", "llama3-8b-ppo")
    assert args.logger.wandb.run_name == "rm01-perturbed"
    assert wandb_logger_created(openrlhf_src, args)
    args_without_key, _ = train_ppo_main(cmd[3:])
    assert not wandb_logger_created(openrlhf_src, args_without_key)
    # the layout: what Ray is asked for fits the recipe's nodes, and matches the count derived by hand
    cfg_layout = plan["layout"]
    assert ray_gpus(args) == cfg_layout["gpus"]["total"] == gpus
    assert gpus <= cfg_layout["nodes"] * cfg_layout["gpus_per_node"]
    if layout == "colocated":
        assert args.train.colocate_all and args.vllm.enable_sleep and args.ds.enable_sleep
        assert cfg_layout["nodes"] == 1 and cfg_layout["gpus_per_node"] == 8
    else:
        assert args.train.colocate_actor_ref and not args.train.colocate_all and not args.vllm.enable_sleep


def test_every_flag_the_plan_may_write_exists(train_ppo_main: Callable) -> None:
    from rmtrain.policy.openrlhf import OPENRLHF_FLAGS

    _, parser = train_ppo_main(["--actor.model_name_or_path", "x", "--reward.remote_url", "http://h/r"])
    known = set(parser._option_string_actions)
    assert sorted(OPENRLHF_FLAGS - known) == []


@pytest.mark.parametrize("targets", ["all-linear", ["q_proj", "v_proj"]])
def test_lora_arguments_attach_adapters_through_peft(material: dict[str, Path], train_ppo_main: Callable,
                                                     openrlhf_src: Path, tmp_path: Path, targets: Any) -> None:
    import peft
    from transformers import AutoModel, AutoModelForCausalLM

    plan = ppo_plan(material, tmp_path / "run", **{"policy.lora.target_modules": targets})
    args, _ = train_ppo_main(plan["train_command"][3:])
    assert args.ds.lora.rank == 64 and args.ds.lora.alpha == 128
    actor = peft.get_peft_model(AutoModelForCausalLM.from_pretrained(material["policy"]),
                                openrlhf_lora_config(openrlhf_src, args, "actor"))
    critic = peft.get_peft_model(AutoModel.from_pretrained(material["policy"]),
                                 openrlhf_lora_config(openrlhf_src, args, "critic"))
    for model in (actor, critic):
        adapted = {n.split(".")[-1] for n, m in model.named_modules() if hasattr(m, "lora_A")}
        expected = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}
        assert adapted == (expected if targets == "all-linear" else set(targets))
        assert model.get_nb_trainable_parameters()[0] > 0
    assert not any("lm_head" in n for n, m in actor.named_modules() if hasattr(m, "lora_A"))


def test_all_linear_as_a_flag_value_is_the_trap(train_ppo_main: Callable, openrlhf_src: Path,
                                                material: dict[str, Path]) -> None:
    """What the plan used to write: OpenRLHF's nargs='*' makes it a list, peft a module name."""
    import peft
    from transformers import AutoModelForCausalLM

    args, _ = train_ppo_main(["--actor.model_name_or_path", "x", "--reward.remote_url", "http://h/r",
                              "--ds.lora.rank", "8", "--ds.lora.target_modules", "all-linear"])
    assert args.ds.lora.target_modules == ["all-linear"]
    with pytest.raises(ValueError, match="all-linear"):
        peft.get_peft_model(AutoModelForCausalLM.from_pretrained(material["policy"]),
                            openrlhf_lora_config(openrlhf_src, args, "actor"))


def test_a_layout_that_does_not_fit_its_nodes_is_refused() -> None:
    # the old plan: reference, actor, critic 8 GPUs each and 4 vLLM engines x TP 2, no colocation
    old = RayLayout(nodes=1, gpus_per_node=8, colocate="none")
    assert old.gpus()["total"] == 32
    with pytest.raises(ConfigError, match="asks Ray for 32 GPUs.*1 node.*8 = 8.*never be ready"):
        old.validate("openrlhf.colocated")
    with pytest.raises(ConfigError, match=r"vllm_engines x vllm_tensor_parallel_size \(4\)"):
        RayLayout(vllm_engines=2).validate("openrlhf.colocated")


def test_openrlhf_logger_lines_are_read_by_collect(openrlhf_src: Path, tmp_path: Path) -> None:
    """Lines written by OpenRLHF's own logger (utils/logging_utils.py, as PPOTrainer.fit logs each
    step), behind Ray's worker prefix, parse into the step's status."""
    from rmtrain.policy.openrlhf import read_train_log

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):  # its handler writes to the sys.stdout it finds at import
        logging_utils = _load_module(openrlhf_src / "utils" / "logging_utils.py", "openrlhf_logging_utils")
        logger = logging_utils.init_logger("openrlhf.trainer.ppo_trainer")
    status = {"policy_loss": -0.12, "kl": 0.0031, "rollout/reward_mean": 0.25, "rollout/response_length_mean": 211.5,
              "timing/step_total": 93.2, "actor_lr": 5e-7}
    for step in (1, 2):
        logger.info(f"✨ Global step {step}: {dict(status, kl=status['kl'] * step)}")
    lines = ["(PPOTrainer pid=4242) " + x for x in buf.getvalue().splitlines()]
    assert all("] ✨ Global step" in x for x in lines)
    (tmp_path / "train.log").write_text("\n".join(lines) + "\n")
    steps, bad = read_train_log(tmp_path / "train.log")
    assert bad == 0 and sorted(steps) == [1, 2]
    assert steps[2] == {**status, "kl": 0.0062}


def test_plan_files_hold_no_key(material: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WANDB_API_KEY", "sentinel-key-0123456789")
    ppo_plan(material, tmp_path / "run")
    d = tmp_path / "run" / "openrlhf"
    for p in tmp_path.rglob("*"):
        if p.is_file():
            assert "sentinel-key" not in p.read_text(errors="replace"), p
    script = (d / "train_ppo.sh").read_text()
    assert '--logger.wandb.key "$WANDB_API_KEY"' in script
    assert subprocess.run(["bash", "-n", str(d / "train_ppo.sh")]).returncode == 0
    plan = json.loads((d / "plan.json").read_text())
    assert "--logger.wandb.key" not in plan["train_command"]
