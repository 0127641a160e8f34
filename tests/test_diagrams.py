"""The course diagrams: drawn by minialbert.course.diagrams, committed under assets/diagrams, shown by
`show`."""

import random
import re
import xml.etree.ElementTree as ET

import pytest

from minialbert.config import MASK_ID
from minialbert.course import diagrams
from minialbert.course.data import course_tokenizer
from minialbert.course.scale import current_scale
from minialbert.masking import MaskingVocab, ngram_mask

SVG_TEXT = "{http://www.w3.org/2000/svg}text"


@pytest.fixture(scope="module")
def drawn(tmp_path_factory):
    """Every diagram, drawn once into a fresh folder: name -> path."""
    folder = tmp_path_factory.mktemp("diagrams")
    return {path.stem: path for path in diagrams.draw_all(folder)}


def texts(path):
    """The text of every label of an SVG, in order."""
    return [el.text or "" for el in ET.parse(path).iter(SVG_TEXT)]


def masking_ids(path):
    """({span ids}, {input ids}) of an SVG drawn by draw_ngram_masking: what each span and piece shows."""
    svg = path.read_text()
    return set(re.findall(r'id="(ngram-span-[^"]*)"', svg)), set(re.findall(r'id="(ngram-input-[^"]*)"', svg))


@pytest.mark.parametrize("name", list(diagrams.DIAGRAMS))
def test_each_diagram_draws_a_nonempty_svg_with_a_title(drawn, name):
    path = drawn[name]
    assert path == diagrams.diagram_path(name, path.parent)
    assert path.stat().st_size > 5000
    assert ET.parse(path).getroot().tag == "{http://www.w3.org/2000/svg}svg"
    assert len(texts(path)[0]) > 20                                 # the title comes first


@pytest.mark.parametrize("name", list(diagrams.DIAGRAMS))
def test_committed_diagrams_are_what_the_code_draws(drawn, name):
    committed = diagrams.diagram_path(name)
    assert committed.is_file(), (f"{committed} is missing: run `python -m minialbert.course.diagrams` "
                                 f"and commit it")
    assert texts(committed) == texts(drawn[name]), (
        f"{committed.name} is out of date with minialbert/course/diagrams.py: "
        f"run `python -m minialbert.course.diagrams`")


def expected_masking():
    """The spans and replacements the package's ngram_mask picks for the diagram's text and seed."""
    tokenizer = course_tokenizer(current_scale("course").data)
    ids, _ = tokenizer.encode_pair(*diagrams.MASKING_TEXT)
    masked = ngram_mask(ids, MaskingVocab.from_tokenizer(tokenizer), random.Random(diagrams.MASKING_SEED))
    spans = {f"ngram-span-{k}-n{s.words}-at-{'-'.join(map(str, s.positions))}"
             for k, s in enumerate(masked.spans)}
    shown = masked.input_ids
    kinds = {p: "mask" if shown[p] == MASK_ID else "kept" if shown[p] == ids[p] else "random"
             for s in masked.spans for p in s.positions}
    return masked, spans, {f"ngram-input-{p}-{kind}" for p, kind in kinds.items()}


def test_masking_diagram_shows_the_spans_the_masking_code_picks(drawn):
    masked, spans, inputs = expected_masking()
    assert {s.words for s in masked.spans} == {1, 2, 3}             # the seed shows every span length
    assert {g.rsplit("-", 1)[1] for g in inputs} == {"mask", "random", "kept"}   # and every replacement
    for path in (drawn["ngram_masking"], diagrams.diagram_path("ngram_masking")):   # fresh and committed
        assert masking_ids(path) == (spans, inputs), (
            f"{path} does not show what ngram_mask picks for seed {diagrams.MASKING_SEED}; if masking.py "
            "changed on purpose, run `python -m minialbert.course.diagrams` and commit the diagrams")


def test_sharing_diagram_counts_parameters_with_the_package(drawn):
    labels = texts(drawn["sharing"])
    for count in ("11.7M", "63.6M", "37.7M", "89.7M"):             # count_parameters, ALBERT-base, E = 128
        assert any(count in label for label in labels), count


def test_flash_tiles_diagram_uses_the_kernel_tiles():
    pytest.importorskip("triton")
    from minialbert.kernels import flash_attention, tiles

    defaults = diagrams.draw_flash_tiles.__defaults__          # n, length, block_m, block_n
    block_m, block_n = defaults[2], defaults[3]
    assert (block_m, block_n) in {(m, n) for m, n, _, _ in tiles.FWD_TILES}
    assert flash_attention.FIXED_BLOCK == 32        # the subtitle: "the CPU interpreter and float32: 32 x 32"


def test_show_displays_the_committed_svg(monkeypatch, drawn):
    import IPython.display

    shown = []
    monkeypatch.setattr(IPython.display, "display", shown.append)
    diagrams.show("nsp_vs_sop", drawn["nsp_vs_sop"].parent)
    (svg,) = shown
    assert isinstance(svg, IPython.display.SVG) and "<svg" in svg.data


def test_show_names_the_missing_file_and_the_command(tmp_path):
    with pytest.raises(FileNotFoundError) as err:
        diagrams.show("model", tmp_path)
    message = str(err.value)
    assert str(tmp_path / "model.svg") in message and "python -m minialbert.course.diagrams" in message


def test_unknown_diagram_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown diagram 'modle'; the diagrams are model, sharing"):
        diagrams.show("modle")
