"""CSV and LIBSVM/svmlight text into zarr stores: layouts, labels, line-precise errors."""

from __future__ import annotations

import logging
import os
import re

import dask
import numpy as np
import pytest
from sklearn.datasets import dump_svmlight_file, load_svmlight_file

from dkernel import DKernelError
from dkernel.data import guess_format, ingest, iter_csv, scan_csv, scan_svmlight


def _write(path, text: str):
    path.write_text(text, encoding="utf-8")
    return path


def _only(tmp_path, *names):
    assert sorted(os.listdir(tmp_path)) == sorted(names)


# --------------------------------------------------------------------------- CSV


def test_csv_with_header_and_last_column_labels(tmp_path):
    src = _write(tmp_path / "d.csv", "a,b,label\n1,2,1\n3.5,-4,0\n\n5,6e-1,1\n")
    ds = ingest(src, tmp_path / "d.zarr", chunk_rows=2)
    np.testing.assert_array_equal(
        ds.X.compute(), np.array([[1, 2], [3.5, -4], [5, 0.6]], dtype=np.float32)
    )
    np.testing.assert_array_equal(ds.y.compute(), [1, 0, 1])
    assert ds.y.dtype == np.int64
    assert (ds.attrs["n"], ds.attrs["d"], ds.attrs["classes"]) == (3, 2, [0, 1])
    assert ds.attrs["source"] == "d.csv" and ds.X.chunks[0] == (2, 1)


def test_csv_without_header_first_column_labels(tmp_path):
    src = _write(tmp_path / "d.csv", "-1,0.5,0.25\n1,1.5,2.5\n")
    ds = ingest(src, tmp_path / "d.zarr", label_column=0, dtype="float64")
    np.testing.assert_array_equal(ds.X.compute(), [[0.5, 0.25], [1.5, 2.5]])
    np.testing.assert_array_equal(ds.y.compute(), [-1, 1])
    assert ds.X.dtype == np.float64
    assert not scan_csv(str(src)).has_header


def test_csv_middle_label_column_and_real_targets(tmp_path):
    src = _write(tmp_path / "d.csv", "1,0.5,2\n3,1.25,4\n")
    ds = ingest(src, tmp_path / "d.zarr", label_column=1)
    np.testing.assert_array_equal(ds.X.compute(), [[1, 2], [3, 4]])
    np.testing.assert_array_equal(ds.y.compute(), [0.5, 1.25])
    assert ds.y.dtype == np.float64 and ds.attrs["classes"] is None


def test_csv_header_and_real_valued_labels(tmp_path):
    src = _write(tmp_path / "d.csv", "a,target,b\n1,1,2\n3,0.25,4\n")
    ds = ingest(src, tmp_path / "d.zarr", label_column=1)
    assert ds.y.dtype == np.float64 and ds.attrs["classes"] is None
    np.testing.assert_array_equal(ds.y.compute(), [1.0, 0.25])
    assert scan_csv(str(src), label_column=1)[:4] == (2, 3, True, False)


def test_csv_no_labels(tmp_path):
    src = _write(tmp_path / "d.csv", "x,y\n1,2\n3,4\n")
    ds = ingest(src, tmp_path / "d.zarr", label_column=None)
    assert ds.y is None and ds.X.shape == (2, 2)


def test_tsv_and_other_delimiters(tmp_path):
    src = _write(tmp_path / "d.TSV", "1\t2\t1\n3\t4\t-1\n")
    ds = ingest(src, tmp_path / "d.zarr")
    np.testing.assert_array_equal(ds.X.compute(), [[1, 2], [3, 4]])
    src = _write(tmp_path / "e.csv", "1;2;1\n3;4;-1\n")
    ds = ingest(src, tmp_path / "e.zarr", delimiter=";")
    np.testing.assert_array_equal(ds.y.compute(), [1, -1])


def test_csv_byte_order_mark_quotes_and_crlf(tmp_path):
    """A spreadsheet export: UTF-8 BOM, quoted fields, Windows line ends."""
    src = tmp_path / "d.csv"
    src.write_bytes(b'\xef\xbb\xbf"1","2.5","1"\r\n"3","4","-1"\r\n')
    ds = ingest(src, tmp_path / "d.zarr")
    np.testing.assert_array_equal(ds.X.compute(), [[1, 2.5], [3, 4]])  # no row lost to a "header"
    np.testing.assert_array_equal(ds.y.compute(), [1, -1])
    src.write_bytes(b'\xef\xbb\xbf"a","b","label"\r\n1,2,1\r\n')
    ds = ingest(src, tmp_path / "d.zarr", overwrite=True)
    assert ds.X.shape == (1, 2)
    src = tmp_path / "d.svm"
    src.write_bytes(b"\xef\xbb\xbf1 1:2\r\n-1 2:3\r\n")
    ds = ingest(src, tmp_path / "s.zarr")
    np.testing.assert_array_equal(ds.X.compute(), [[2, 0], [0, 3]])


def test_csv_many_blocks(tmp_path, rng):
    X = rng.standard_normal((2000, 3)).round(4)
    y = rng.integers(0, 2, 2000)
    lines = [",".join(f"{v:.4f}" for v in row) + f",{lab}" for row, lab in zip(X, y)]
    src = _write(tmp_path / "d.csv", "\n".join(lines) + "\n")
    ds = ingest(src, tmp_path / "d.zarr", chunk_rows=300, dtype="float64")
    np.testing.assert_allclose(ds.X.compute(), X)
    np.testing.assert_array_equal(ds.y.compute(), y)


@pytest.mark.parametrize(
    "text, kwargs, match",
    [
        ("1,2,3\n4,5\n", {}, r"line 2 has 2 columns, expected 3 \(ragged CSV\)"),
        ("a,b,c\n1,2,3\n4,5,6\n7,8,9,10\n", {}, "line 4 has 4 columns, expected 3"),
        ("1,2,3\n4,x,6\n", {}, r"line 2, column 2: cannot read 'x' as a number"),
        ("1,2,3\n4,5,\n", {}, r"line 2, column 3: the label is empty"),
        ("1,2,3\n4,,6\n", {}, r"line 2, column 2: cannot read '' as a number"),
        ("1,2,3\n4,nan,6\n", {}, "line 2, column 2: value nan is not finite"),
        ("1,2,3\n4,1e400,6\n", {}, r"line 2, column 2: value 1e400 is beyond the range of a"),
        ("1,2,3\n4,-1e999,6\n", {}, r"column 2: value -1e999 is beyond the range"),
        ("", {}, "no data rows"),
        ("a,b,c\n", {}, "no data rows"),
        ("1,2\n", {"label_column": 5}, "label_column=5 is outside the 2 columns"),
        ("1\n2\n", {}, "no feature columns besides the label column"),
    ],
)
def test_bad_csv(tmp_path, text, kwargs, match):
    src = _write(tmp_path / "d.csv", text)
    with pytest.raises(DKernelError, match=match):
        ingest(src, tmp_path / "d.zarr", **kwargs)
    _only(tmp_path, "d.csv")


def test_bad_value_late_in_a_big_csv_leaves_nothing(tmp_path):
    lines = [f"{i},{i + 1},1" for i in range(40000)] + ["1,oops,1"]
    src = _write(tmp_path / "d.csv", "\n".join(lines) + "\n")
    with pytest.raises(DKernelError, match="line 40001, column 2: cannot read 'oops'"):
        ingest(src, tmp_path / "d.zarr", chunk_rows=1000)
    _only(tmp_path, "d.csv")


@pytest.fixture
def python_parsed(caplog):
    """The runs of CSV lines parsed line by line in Python, as ``(first, last)`` line
    numbers: the data layer logs each run NumPy's C parser rejected (at DEBUG)."""
    caplog.set_level(logging.DEBUG, logger="dkernel.data")

    def runs() -> list[tuple[int, int]]:
        found = [
            re.search(r": lines (\d+)-(\d+) read line by line", r.getMessage())
            for r in caplog.records
        ]
        return [(int(m[1]), int(m[2])) for m in found if m]

    return runs


def test_csv_values_go_through_numpys_c_parser(tmp_path, rng, python_parsed):
    """A clean file is parsed in blocks by np.loadtxt; no line goes through Python."""
    X = rng.standard_normal((5000, 4)).round(5)
    y = rng.integers(0, 3, 5000)
    src = tmp_path / "d.csv"
    np.savetxt(src, np.column_stack([X, y]), delimiter=",", fmt=["%.5f"] * 4 + ["%d"])
    lay = scan_csv(str(src), label_column=-1)
    blocks = list(iter_csv(str(src), lay, 1024))
    assert python_parsed() == []
    assert [len(b) for b in blocks] == [1024] * 4 + [904]  # streamed, one block at a time
    np.testing.assert_allclose(np.concatenate(blocks), np.column_stack([X, y]))
    assert lay[:4] == (5000, 5, False, True) and lay.label_names is None


def test_csv_slow_path_only_for_the_block_that_needs_it(tmp_path, python_parsed):
    lines = [f"{i},{i % 2}" for i in range(3000)]
    lines[2500] = "'2500',0"  # single quotes and spaces: Python reads them, NumPy does not
    lines[2600] = "   "
    src = _write(tmp_path / "d.csv", "\n".join(lines) + "\n")
    lay = scan_csv(str(src), label_column=-1)
    B = np.concatenate(list(iter_csv(str(src), lay, 500)))
    assert B.shape == (2999, 2) and lay.n_rows == 2999
    np.testing.assert_array_equal(B[2499:2501, 0], [2499, 2500])
    assert B[-1, 0] == 2999
    # the one block of 500 lines holding lines 2501 and 2601
    assert python_parsed() == [(2501, 3000)]


def test_ragged_row_in_a_late_block_names_its_line(tmp_path):
    lines = [f"{i},{i},1" for i in range(20000)]
    lines[19000] = "1,2,3,4"
    src = _write(tmp_path / "d.csv", "\n".join(lines) + "\n")
    with pytest.raises(DKernelError, match=r"line 19001 has 4 columns, expected 3 \(ragged CSV\)"):
        ingest(src, tmp_path / "d.zarr")
    _only(tmp_path, "d.csv")


def test_csv_header_and_blank_lines_across_blocks(tmp_path):
    text = "x,y,label\n" + "".join(f"{i},{-i},{i % 2}\n\n" for i in range(50))
    src = _write(tmp_path / "d.csv", text)
    lay = scan_csv(str(src), label_column=-1)
    assert (lay.n_rows, lay.has_header) == (50, True)
    blocks = list(iter_csv(str(src), lay, 7))
    B = np.concatenate(blocks)
    np.testing.assert_array_equal(B[:, 0], np.arange(50))
    np.testing.assert_array_equal(B[:, 1], -np.arange(50))


def test_ingest_progress_bars_when_configured(tmp_path, capsys):
    src = _write(tmp_path / "d.csv", "".join(f"{i},{i % 2}\n" for i in range(300)))
    ingest(src, tmp_path / "a.zarr")
    assert capsys.readouterr().err == ""  # a library call prints nothing unless asked
    with dask.config.set({"dkernel.progress": True}):
        ingest(src, tmp_path / "b.zarr")
    err = capsys.readouterr().err
    assert "scan d.csv" in err and "ingest d.csv" in err and "300/300" in err
    svm = _write(tmp_path / "d.svm", "".join(f"{i % 2} 1:{i}\n" for i in range(120)))
    with dask.config.set({"dkernel.progress": True}):
        ingest(svm, tmp_path / "c.zarr")
    err = capsys.readouterr().err
    assert "scan d.svm" in err and "120/120" in err


# --------------------------------------------------------------------------- LIBSVM


LIBSVM = """# a comment line
+1 1:0.5 3:-2 # trailing comment
-1 qid:7 2:1.5

1 4:3e-1
-1
"""


def test_libsvm_one_based(tmp_path):
    src = _write(tmp_path / "d.svm", LIBSVM)
    ds = ingest(src, tmp_path / "d.zarr", chunk_rows=3, dtype="float64")
    expect = np.array([[0.5, 0, -2, 0], [0, 1.5, 0, 0], [0, 0, 0, 0.3], [0, 0, 0, 0]])
    np.testing.assert_array_equal(ds.X.compute(), expect)
    np.testing.assert_array_equal(ds.y.compute(), [1, -1, 1, -1])
    assert ds.attrs["classes"] == [-1, 1] and ds.attrs["d"] == 4


def test_libsvm_zero_based_and_n_features(tmp_path):
    src = _write(tmp_path / "d.txt", "0 0:1 2:2\n1 1:3\n")
    ds = ingest(src, tmp_path / "d.zarr", zero_based=True, n_features=6)
    np.testing.assert_array_equal(ds.X.compute(), [[1, 0, 2, 0, 0, 0], [0, 3, 0, 0, 0, 0]])
    np.testing.assert_array_equal(ds.y.compute(), [0, 1])


def test_libsvm_matches_sklearn(tmp_path, rng):
    X = rng.standard_normal((500, 7)).round(3)
    X[rng.random(X.shape) < 0.6] = 0.0
    y = rng.integers(0, 2, 500) * 2 - 1
    dump_svmlight_file(X, y, str(tmp_path / "d.svm"), zero_based=False)
    Xs, ys = load_svmlight_file(str(tmp_path / "d.svm"), n_features=7)
    ds = ingest(
        tmp_path / "d.svm", tmp_path / "d.zarr", chunk_rows=64, dtype="float64", n_features=7
    )
    np.testing.assert_allclose(ds.X.compute(), Xs.toarray())
    np.testing.assert_array_equal(ds.y.compute(), ys)
    assert ds.X.chunks[0][0] == 64


def test_libsvm_real_targets(tmp_path):
    src = _write(tmp_path / "d.svm", "0.5 1:1\n-2.25 2:1\n")
    ds = ingest(src, tmp_path / "d.zarr")
    np.testing.assert_array_equal(ds.y.compute(), [0.5, -2.25])
    assert ds.attrs["classes"] is None


@pytest.mark.parametrize(
    "text, kwargs, match",
    [
        (
            "1 1:1\n-1 0:2\n",
            {},
            r"line 2: bad feature index '0' \(indices are 1-based\); a zero-based file needs "
            r"zero_based=True \(--zero-based in the CLI\)",
        ),
        (
            "1 -1:1\n",
            {"zero_based": True},
            r"line 1: bad feature index '-1' \(indices are 0-based\)",
        ),
        ("1 1:1\n1 3:1 2:1\n", {}, "line 2: feature index 2 is not larger than the one before it"),
        ("1 1:1\n1 2:1 2:3\n", {}, "line 2: feature index 2 is not larger"),
        ("1 1:1\n\n1 2 3:1\n", {}, "line 3: expected index:value, got '2'"),
        ("1 a:1\n", {}, "line 1: bad feature index 'a'"),
        ("1 1:x\n", {}, "line 1: cannot read value 'x' of feature 1"),
        ("1 1:inf\n", {}, "line 1: value of feature 1 is not finite"),
        ("cat 1:1\n", {}, "line 1: cannot read label 'cat'"),
        ("nan 1:1\n", {}, "line 1: label 'nan' is not finite"),
        ("# only a comment\n\n", {}, "no data rows"),
        ("1 5:1\n", {"n_features": 3}, "a feature index exceeds n_features=3"),
        ("1 1:1\n", {"n_features": 0}, "n_features must be >= 1"),
    ],
)
def test_bad_libsvm(tmp_path, text, kwargs, match):
    src = _write(tmp_path / "d.svm", text)
    with pytest.raises(DKernelError, match=match):
        ingest(src, tmp_path / "d.zarr", **kwargs)
    _only(tmp_path, "d.svm")


def test_bad_index_late_in_a_big_libsvm_leaves_nothing(tmp_path):
    lines = [f"{1 - 2 * (i % 2)} 1:{i} 2:1" for i in range(30000)] + ["1 0:1"]
    src = _write(tmp_path / "d.svm", "\n".join(lines) + "\n")
    with pytest.raises(DKernelError, match="line 30001: bad feature index '0'"):
        ingest(src, tmp_path / "d.zarr", chunk_rows=1000)
    _only(tmp_path, "d.svm")


def test_scan_svmlight_layout(tmp_path):
    src = _write(tmp_path / "d.svm", LIBSVM)
    lay = scan_svmlight(str(src))
    assert (lay.n_rows, lay.n_features, lay.integral_labels) == (4, 4, True)


@pytest.mark.parametrize(
    "name, fmt",
    [
        ("a.npz", "npz"),
        ("a.CSV", "csv"),
        ("a.tsv", "csv"),
        ("a.svm", "svmlight"),
        ("a.libsvm", "svmlight"),
        ("a.txt", "svmlight"),
        ("a9a.t", "svmlight"),
        ("a", "svmlight"),
    ],
)
def test_guess_format(name, fmt):
    assert guess_format(name) == fmt


def test_explicit_format_overrides_extension(tmp_path):
    src = _write(tmp_path / "d.data", "1,2,1\n3,4,-1\n")
    ds = ingest(src, tmp_path / "d.zarr", format="csv")
    assert ds.X.shape == (2, 2)


# --------------------------------------------------------------------------- text labels


def test_csv_text_labels_are_class_names(tmp_path):
    src = _write(
        tmp_path / "d.csv",
        'x0,x1,species\n1,2,cat\n3,4,"dog"\n\n5,6,cat\n7,8,bird\n',
    )
    ds = ingest(src, tmp_path / "d.zarr")
    assert ds.attrs["label_names"] == ["bird", "cat", "dog"]
    assert ds.attrs["classes"] == [0, 1, 2]
    np.testing.assert_array_equal(ds.y.compute(), [1, 2, 1, 0])
    assert ds.y.dtype == np.int64
    np.testing.assert_array_equal(ds.X.compute(), [[1, 2], [3, 4], [5, 6], [7, 8]])
    names = np.asarray(ds.attrs["label_names"])[ds.y.compute()]
    assert names.tolist() == ["cat", "dog", "cat", "bird"]


def test_csv_text_labels_in_the_first_column_without_header(tmp_path, rng):
    """A first line whose only text is its label is data, not a header; many blocks."""
    labels = rng.choice(["a", "b", "c"], 5000)
    X = rng.standard_normal((5000, 2))
    lines = [f"{lab},{a:.6f},{b:.6f}" for lab, (a, b) in zip(labels, X)]
    src = _write(tmp_path / "d.csv", "\n".join(lines) + "\n")
    ds = ingest(src, tmp_path / "d.zarr", label_column=0, chunk_rows=700)
    assert ds.n_samples == 5000 and ds.attrs["label_names"] == ["a", "b", "c"]
    np.testing.assert_array_equal(np.asarray(["a", "b", "c"])[ds.y.compute()], labels)
    np.testing.assert_allclose(ds.X.compute(), X, atol=1e-6)


def test_csv_mixed_number_and_text_labels_are_all_names(tmp_path):
    src = _write(tmp_path / "d.csv", "1,2,3\n4,5,cat\n")
    ds = ingest(src, tmp_path / "d.zarr")
    assert ds.attrs["label_names"] == ["3", "cat"]
    np.testing.assert_array_equal(ds.y.compute(), [0, 1])


def test_csv_text_in_a_feature_column_is_still_an_error(tmp_path):
    src = _write(tmp_path / "d.csv", "1,2,cat\n4,x,dog\n")
    with pytest.raises(DKernelError, match=r"line 2, column 2: cannot read 'x' as a number"):
        ingest(src, tmp_path / "d.zarr")


def test_csv_too_many_distinct_text_labels(tmp_path, dkernel_config):
    dkernel_config({"data.max-label-names": 3})
    src = _write(tmp_path / "d.csv", "".join(f"{i},id{i}\n" for i in range(10)))
    with pytest.raises(DKernelError, match="column 2 has more than 3 distinct text values"):
        ingest(src, tmp_path / "d.zarr")
    _only(tmp_path, "d.csv")


# --------------------------------------------------------------------------- compressed


@pytest.mark.parametrize("compress", ["gzip", "bz2"])
def test_compressed_csv_and_libsvm(tmp_path, compress):
    import bz2
    import gzip

    opener = gzip.open if compress == "gzip" else bz2.open
    ext = ".gz" if compress == "gzip" else ".bz2"
    with opener(tmp_path / f"d.csv{ext}", "wt", encoding="utf-8") as fh:
        fh.write("a,b,label\n1,2,1\n3,4,0\n")
    ds = ingest(tmp_path / f"d.csv{ext}", tmp_path / "c.zarr")
    np.testing.assert_array_equal(ds.X.compute(), [[1, 2], [3, 4]])
    np.testing.assert_array_equal(ds.y.compute(), [1, 0])
    with opener(tmp_path / f"d.svm{ext}", "wt", encoding="utf-8") as fh:
        fh.write("1 1:2 3:1\n-1 2:3\n")
    ds = ingest(tmp_path / f"d.svm{ext}", tmp_path / "l.zarr")
    np.testing.assert_array_equal(ds.X.compute(), [[2, 0, 1], [0, 3, 0]])
    np.testing.assert_array_equal(ds.y.compute(), [1, -1])
    # found by its bytes, whatever the name says
    os.rename(tmp_path / f"d.csv{ext}", tmp_path / "plain-name.csv")
    ds = ingest(tmp_path / "plain-name.csv", tmp_path / "p.zarr")
    np.testing.assert_array_equal(ds.y.compute(), [1, 0])


def test_compressed_file_with_a_bad_value_names_its_line(tmp_path):
    import gzip

    with gzip.open(tmp_path / "d.csv.gz", "wt", encoding="utf-8") as fh:
        fh.write("1,2,1\n3,x,0\n")
    with pytest.raises(DKernelError, match=r"line 2, column 2: cannot read 'x'"):
        ingest(tmp_path / "d.csv.gz", tmp_path / "d.zarr")


def test_truncated_gzip_is_one_error(tmp_path):
    import gzip

    raw = gzip.compress(b"1,2,1\n" * 5000)
    (tmp_path / "d.csv.gz").write_bytes(raw[: len(raw) // 2])
    with pytest.raises(DKernelError, match="cannot decompress it near line"):
        ingest(tmp_path / "d.csv.gz", tmp_path / "d.zarr")
    _only(tmp_path, "d.csv.gz")


@pytest.mark.parametrize("fmt", ["csv", "svmlight"])
def test_binary_file_is_not_text(tmp_path, fmt):
    (tmp_path / "d.bin").write_bytes(bytes(range(256)) * 8)
    with pytest.raises(DKernelError, match=r"d.bin is not a text file \(bytes near line 1"):
        ingest(tmp_path / "d.bin", tmp_path / "d.zarr", format=fmt)
    _only(tmp_path, "d.bin")


@pytest.mark.parametrize(
    "name, fmt", [("a.csv.gz", "csv"), ("a.tsv.bz2", "csv"), ("a.svm.gz", "svmlight")]
)
def test_guess_format_looks_through_compression(name, fmt):
    assert guess_format(name) == fmt


def test_gzipped_tsv_uses_tabs(tmp_path):
    import gzip

    with gzip.open(tmp_path / "d.tsv.gz", "wt", encoding="utf-8") as fh:
        fh.write("1\t2\t1\n3\t4\t0\n")
    ds = ingest(tmp_path / "d.tsv.gz", tmp_path / "d.zarr")
    np.testing.assert_array_equal(ds.X.compute(), [[1, 2], [3, 4]])
