"""The packaged-model registry's files, read without loading any model (fast)."""

import pytest


def test_a_damaged_provenance_file_is_named_with_what_to_do(tmp_path, monkeypatch):
    """A cache entry's or a folder's seakr-source.json that is not a JSON object was a bare JSON error (or an
    AttributeError for a list), naming no file."""
    from seakr.models import registry

    monkeypatch.setenv("SEAKR_CACHE", str(tmp_path))
    base = tmp_path / "models" / "m-0123"
    base.mkdir(parents=True)
    folder = tmp_path / "hf"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    for content, said in (("{broken", ":1: invalid JSON"), ("[1]", ": not a JSON object of the model's provenance")):
        for f in (base / "seakr-source.json", folder / "seakr-source.json"):
            f.write_text(content)
        with pytest.raises(ValueError) as e:
            registry._converted(base, "float32", "m", lambda td: td / "x.gguf", {"name": "m"})
        assert str(e.value).startswith(f"{base / 'seakr-source.json'}{said}") and "delete that folder" in str(e.value)
        with pytest.raises(ValueError) as e:
            registry.resolve(str(folder))
        assert str(e.value).startswith(f"{folder / 'seakr-source.json'}{said}") and "fix or delete" in str(e.value)


def test_a_cache_path_through_a_file_names_the_variable(tmp_path, monkeypatch):
    """SEAKR_CACHE naming a file was "[Errno 20] Not a directory: '.../locks'" at the first conversion or pooled
    index, naming neither the variable nor the file."""
    from seakr.models import registry

    (tmp_path / "f").write_text("x")
    for value in (tmp_path / "f", tmp_path / "f" / "sub"):
        monkeypatch.setenv("SEAKR_CACHE", str(value))
        with pytest.raises(ValueError, match=f"SEAKR_CACHE={value}: {tmp_path / 'f'} is not a directory"):
            registry.cache_root()
    monkeypatch.setenv("SEAKR_CACHE", str(tmp_path / "new" / "cache"))  # not there yet: made when first written
    assert registry.cache_root() == tmp_path / "new" / "cache"
    monkeypatch.setenv("SEAKR_CACHE", " ")  # it made a folder named " " wherever the command ran
    with pytest.raises(ValueError, match="SEAKR_CACHE=' ': blank; point it at a folder, or unset it for the default"):
        registry.cache_root()
    monkeypatch.setenv("SEAKR_CACHE", "")  # set empty: unset, as shells write it
    assert registry.cache_root().name == "seakr"
