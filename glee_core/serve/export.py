"""Export a stored run as a self-contained classifier folder, and load one back.

``export_run(run, out)`` writes

* ``model.safetensors`` - the run's weights: the whole model (fine-tuned), or the head alone
  (quick mode, frozen backbone);
* ``backbone/`` - the backbone's ``config.json`` and tokenizer files; with ``include_backbone``
  (quick mode only) also its weights, otherwise the backbone is referenced by name and
  fingerprint and :func:`load_classifier` refuses a different one;
* ``glee_classifier.json`` - the run record: method spec, classes with head/tail, template,
  verbalizer, max length, metrics summary, run id;
* ``README.md`` - a Hugging Face model card (YAML metadata + the run's head/tail report).

``load_classifier(folder)`` rebuilds the model from JSON and safetensors only: nothing is
unpickled and no remote code runs (``trust_remote_code=False`` throughout).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path

from .. import __version__
from ..core.errors import GleeError
from ..core.files import write_json
from ..models.backbone import backbone_from_config, load_backbone
from ..models.scoring import get_backbone
from ..runs.ensemble import ensemble_test_scores
from ..runs.json_values import RecordError, integer, mapping
from ..runs.record import METRIC_KEYS, RunRecord
from ..runs.store import Run, RunStore
from .card import Form, model_card
from .ensemble import (
    ENSEMBLE_FILE,
    EnsembleScorer,
    check_form,
    ensemble_card,
    ensemble_manifest,
    member_folders,
)
from .export_formats import EXPORT_FORMATS, ExportFormat, either, export_format
from .inference import Scorer

FORMAT_VERSION = 1
CLASSIFIER_FILE = "glee_classifier.json"
WEIGHTS_FILE = "model.safetensors"
BACKBONE_FOLDER = "backbone"


def export_run(
    run: Run,
    out: str | Path,
    include_backbone: bool = False,
    form: str = "glee",
    quantize: str | None = None,
) -> Path:
    """Write ``run`` as a classifier folder at ``out`` (a new or empty folder) in ``form``
    (``glee``, or one of :mod:`glee_core.serve.formats`'s)."""
    out = new_folder(out)
    target = export_format(form)
    why = target.refusal(run.record)
    if why:
        raise GleeError(why)
    if quantize and not target.quantizes:
        raise GleeError(f"--quantize is for --format {_formats_that('quantizes')}")
    if include_backbone and not target.holds_backbone:
        raise GleeError(
            f"--include-backbone is for --format {_formats_that('holds_backbone')} (the other "
            "forms hold every weight they need)"
        )
    if target.writer is not None:
        return _export_form(run, out, target, quantize)
    record = run.record
    kept = record.hyperparameters.tuning.keeps_backbone
    if include_backbone and not kept:
        raise GleeError(
            "--include-backbone is for runs that keep the pretrained backbone "
            "(quick mode, LoRA, P-tuning v2); a fine-tuned run's weights already "
            "hold its whole backbone"
        )
    backbone = get_backbone(record.model.name)  # config, tokenizer (and, kept, the weights)
    with staged(out) as tmp:
        (tmp / BACKBONE_FOLDER).mkdir()
        shutil.copyfile(run.weights_path, tmp / WEIGHTS_FILE)
        backbone.tokenizer.save_pretrained(tmp / BACKBONE_FOLDER)
        if include_backbone:
            backbone.model.save_pretrained(tmp / BACKBONE_FOLDER, safe_serialization=True)
        else:
            backbone.model.config.save_pretrained(tmp / BACKBONE_FOLDER)
        write_json(
            tmp / CLASSIFIER_FILE,
            {
                "format_version": FORMAT_VERSION,
                "glee_core": __version__,
                "backbone": {
                    "folder": BACKBONE_FOLDER,
                    "weights": "model"
                    if not kept
                    else ("backbone" if include_backbone else "referenced"),
                    "name": record.model.name,
                    "fingerprint": record.model.fingerprint,
                },
                "record": record.to_dict(),
                "metrics": {k: run.metrics.value(k) for k in METRIC_KEYS},
            },
        )
        (tmp / "README.md").write_text(model_card(run, include_backbone), encoding="utf-8")
    return out


def export_ensemble(
    runs: list[Run],
    out: str | Path,
    include_backbone: bool = False,
    scores: dict | None = None,
    form: str = "glee",
    quantize: str | None = None,
) -> Path:
    """Write ``runs`` (two or more of one dataset: the recommendation's ensemble) as one folder
    at ``out`` (new or empty): each member the studio's classifier folder (``member-1/``, ...),
    ``glee_ensemble.json`` naming them, and a model card; ``scores``: the ensemble's test scores
    for it (``{"f1", "tail_f1", "seeds"}``, %; default: these runs' own, from their stored
    test logits). ``form`` and ``quantize``: what was asked (the studio's folder alone, not
    quantized, carries an ensemble: anything else is refused before a file is written).
    :func:`load_classifier` reads it back."""
    check_form(form, quantize, len(runs))
    folders = [f"member-{i}" for i in range(1, len(runs) + 1)]
    if scores is None and len({run.seed for run in runs}) == 1:
        scores = {**ensemble_test_scores(runs), "seeds": 1}
    manifest = ensemble_manifest(runs, folders, scores)  # checks the runs go together
    out = new_folder(out)
    with staged(out) as tmp:
        for run, folder in zip(runs, folders, strict=True):
            export_run(run, tmp / folder, include_backbone)
        write_json(tmp / ENSEMBLE_FILE, manifest)
        (tmp / "README.md").write_text(ensemble_card(runs, folders, scores), encoding="utf-8")
    return out


def new_folder(out: str | Path) -> Path:
    """``--out`` as an export writes it: a path of its own (not a symbolic link) to a new or
    empty folder; a GleeError saying what to give otherwise."""
    out = Path(out).expanduser()
    if out.is_symlink():
        raise GleeError(
            f"{out} is a symbolic link; give --out a folder path of its own (a new or empty folder)"
        )
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise GleeError(f"{out} exists and is not an empty folder; choose a new --out")
    return out


@contextmanager
def staged(out: Path):
    """A folder written whole beside ``out`` (a new ``.NAME.<random>.tmp`` of its own, so no
    file or folder of the user's is touched) and renamed into place at the end; nothing is left
    of it when writing fails. ``out`` may exist only as an empty folder (removed, not emptied:
    a folder with anything in it stays as it was)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent))
    tmp.chmod(0o777 & ~_umask())  # an ordinary folder's mode (mkdtemp makes it 0700)
    try:
        yield tmp
        _leaves_the_machine(tmp)
        if out.is_dir() and not out.is_symlink():
            out.rmdir()  # an empty folder the user made; OSError if something came into it
        tmp.rename(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _leaves_the_machine(folder: Path) -> None:
    """An exported folder as it goes elsewhere: no path of this machine in its configs
    (transformers writes the backbone's local folder as ``_name_or_path``), and every file
    with an ordinary mode (safetensors and some savers write 0600)."""
    mode = 0o666 & ~_umask()
    for path in folder.rglob("*"):
        if path.is_file():
            path.chmod(mode)
        if path.name in ("config.json", "tokenizer_config.json", "adapter_config.json"):
            try:
                values = json.loads(path.read_text(encoding="utf-8"))
            except ValueError:
                continue
            changed = False
            for key in ("_name_or_path", "name_or_path", "base_model_name_or_path"):
                value = values.get(key) if isinstance(values, dict) else None
                if isinstance(value, str) and (
                    value.startswith(("/", "~", ".")) or Path(value).exists() or "\\" in value
                ):
                    values[key] = ""  # a folder of this machine: nothing another could open
                    changed = True
            if changed:
                path.write_text(
                    json.dumps(values, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
                )


def _umask() -> int:
    """The process's umask, read without setting it (``os.umask`` sets it, for a moment, for
    every thread of the app); 022 where the system does not say."""
    try:
        status = Path("/proc/self/status").read_text(encoding="ascii")
        return int(status.split("Umask:", 1)[1].split()[0], 8)
    except (OSError, IndexError, ValueError):
        return 0o022


def _formats_that(what: str) -> str:
    """The forms whose record says ``what`` (an :class:`ExportFormat` flag), for a message."""
    return either(f.name for f in EXPORT_FORMATS.values() if getattr(f, what))


def _export_form(run: Run, out: Path, target: ExportFormat, quantize: str | None) -> Path:
    """A form with a writer of its own: its files and a card saying how to load them."""
    with staged(out) as tmp:
        lines, kind, change = target.write(run, tmp, quantize)
        loading = tuple(line.replace(f'"{tmp.name}"', '"path/to/this/folder"') for line in lines)
        card = model_card(run, exported=Form(target.name, kind, loading, change))
        (tmp / "README.md").write_text(card, encoding="utf-8")
    return out


def export_zip(run: Run | list[Run], form: str, quantize: str | None = None) -> tuple[bytes, str]:
    """``run`` exported in ``form`` as a zip archive (the app's download) and the lines that
    load it (the card's first code block); a list of runs: their ensemble, as the studio's
    folder (:func:`export_ensemble`)."""
    import zipfile  # noqa: PLC0415
    from io import BytesIO  # noqa: PLC0415

    with tempfile.TemporaryDirectory(prefix="glee-export-") as tmp:
        if isinstance(run, list):
            name = f"{run[0].run_id}-average-of-{len(run)}"
            out = export_ensemble(run, Path(tmp) / name, form=form, quantize=quantize)
        else:
            name = f"{run.run_id}-{form}"
            out = export_run(run, Path(tmp) / name, form=form, quantize=quantize)
        buffer = BytesIO()
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
            for path in sorted(out.rglob("*")):
                if path.is_file():
                    archive.write(path, f"{name}/{path.relative_to(out).as_posix()}")
        card = (out / "README.md").read_text(encoding="utf-8")
    code = card.split("```python\n", 1)[1].split("```", 1)[0] if "```python\n" in card else ""
    return buffer.getvalue(), code.replace("path/to/this/folder", name)


def push_to_hub(folder: Path, repo: str, private: bool = False) -> str:
    """Upload ``folder`` to the Hub as ``repo`` (huggingface_hub's upload API; the token as it
    finds it); one GleeError saying why when it cannot (offline, no token, refused)."""
    from huggingface_hub import HfApi  # noqa: PLC0415 (only this flag needs the network)

    api = HfApi()
    try:
        api.create_repo(repo, private=private, exist_ok=True)
        info = api.upload_folder(
            folder_path=str(folder), repo_id=repo, commit_message="Glee Studio export"
        )
    except Exception as exc:  # offline, no token, refused, a bad name: each is one line
        raise GleeError(
            f"cannot push to the Hub as {repo!r}: {str(exc).splitlines()[0]} (the "
            "folder is written; push it later with huggingface-cli upload)"
        ) from None
    return str(getattr(info, "commit_url", repo))


def onnx_folder(run: Run, rebuild: bool = False) -> Path:
    """The run as an ONNX classifier for ``predict --engine onnx``: exported once, beside the
    run store's runs (``.exports/<run id>-onnx``), and re-used. ``rebuild``: the one there is
    damaged (a truncated spec, a garbage graph, an emptied folder): the store's own copy, so it
    is removed and exported anew."""
    folder = RunStore(run.path.parent).exports_dir / f"{run.run_id}-onnx"
    if rebuild or (folder.is_dir() and not any(folder.iterdir())):
        shutil.rmtree(folder, ignore_errors=True)
    if not folder.is_dir():  # written whole, then renamed into place (a killed export: none)
        export_run(run, folder, form="onnx")
    return folder


def load_classifier(folder: str | Path, device: str = "cpu") -> Scorer | EnsembleScorer:
    """A classifier folder written by :func:`export_run`, ready to score text. Needs no run
    store; reads JSON and safetensors only. An ensemble's folder
    (:func:`glee_core.serve.ensemble.export_ensemble`) loads as its members averaged."""
    folder = Path(folder).expanduser()
    if (folder / ENSEMBLE_FILE).is_file():
        return EnsembleScorer([load_classifier(m, device) for m in member_folders(folder)])
    manifest_path = folder / CLASSIFIER_FILE
    if not manifest_path.is_file():
        raise GleeError(f"{folder} is not an exported Glee classifier ({CLASSIFIER_FILE} missing)")
    try:
        manifest = mapping(json.loads(manifest_path.read_text(encoding="utf-8")), "the manifest")
        if integer(manifest.get("format_version", 0), "format_version") > FORMAT_VERSION:
            raise GleeError(
                f"{folder} was exported by a newer glee_core "
                f"({manifest.get('glee_core')}); upgrade to load it"
            )
        record = RunRecord.from_dict(manifest.get("record"))
        source = mapping(manifest.get("backbone"), "backbone")
        if source.get("weights") not in ("model", "backbone", "referenced") or not all(
            isinstance(source.get(k), str) for k in ("folder", "name", "fingerprint")
        ):
            raise RecordError(f"backbone is {source!r}, not where the backbone's weights are")
    except ValueError as exc:  # bad JSON, or a RecordError
        raise GleeError(f"{manifest_path} is damaged: {exc}; export the run again") from None
    backbone_dir = folder / source["folder"]
    if source["weights"] == "model":  # fine-tuned: every weight is in model.safetensors
        backbone = backbone_from_config(backbone_dir, manifest["record"]["model"])
    elif source["weights"] == "backbone":
        backbone = load_backbone(str(backbone_dir))
    else:  # referenced: the same backbone must be found here
        backbone = load_backbone(source["name"])
        if source["fingerprint"] and backbone.fingerprint != source["fingerprint"]:
            raise GleeError(
                f"the backbone {source['name']!r} found here (fingerprint "
                f"{backbone.fingerprint}) is not the one this classifier was trained "
                f"on ({source['fingerprint']}); export it with --include-backbone"
            )
    return Scorer.from_record(record, backbone, folder / WEIGHTS_FILE, device)
