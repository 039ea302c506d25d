"""Data layer: zarr 3 stores, seeded chunk-grouped batch sampling, synthetic generators."""

# The internal surface: what the other subpackages use (not part of the public API).
from .._secrets import redact as redact  # masks storage credentials in any text shown
from ._atomic import HOST_TAG as HOST_TAG
from ._atomic import terminate_as_interrupt as terminate_as_interrupt
from ._checkpoint import CheckpointFile as CheckpointFile
from ._checkpoint import fingerprint, load_checkpoint, save_checkpoint
from ._files import check_folder_writable as check_folder_writable
from ._files import check_output, check_prefix_writable, file_size, read_bytes, write_bytes
from ._generators import GEN_BLOCK as GEN_BLOCK
from ._generators import (
    make_checkerboard,
    make_gauss,
    make_pathological,
    make_rings,
    make_waveform,
)
from ._labels import are_names as are_names
from ._labels import code_labels as code_labels
from ._labels import code_names as code_names
from ._labels import decode as decode
from ._location import URL_FORMS, Location, as_location, close_clients
from ._location import describe_error as describe_error
from ._readers import guess_format as guess_format
from ._readers import iter_csv as iter_csv
from ._readers import scan_csv as scan_csv
from ._readers import scan_svmlight as scan_svmlight
from ._resident import ResidentRows, collect_parts, range_workers
from ._sampling import chunk_bounds, draw_indices, sample_rows, take_rows
from ._sampling import group_by_chunk as group_by_chunk
from ._sampling import take_graph as take_graph
from ._store import (
    ALIGN_ROWS,
    Dataset,
    as_array_input,
    check_array_name,
    ingest,
    open_dataset,
    write_array,
    write_arrays,
)
from ._store import StoreWriter as StoreWriter
from ._store import default_chunk_rows as default_chunk_rows
from ._verify import MANIFEST_KEY as MANIFEST_KEY
from ._verify import ChunkGrid as ChunkGrid
from ._verify import RowSource
from ._verify import checksum as checksum
from ._verify import chunk_grid as chunk_grid
from ._verify import join_rows as join_rows
from ._verify import open_for_read as open_for_read
from ._verify import pass_groups as pass_groups
from ._verify import plain_layout as plain_layout
from ._verify import read_plain as read_plain
from ._verify import row_blocks as row_blocks
from ._verify import row_bytes as row_bytes

__all__ = [
    "ALIGN_ROWS",
    "URL_FORMS",
    "Dataset",
    "Location",
    "ResidentRows",
    "RowSource",
    "as_array_input",
    "as_location",
    "check_array_name",
    "check_output",
    "check_prefix_writable",
    "chunk_bounds",
    "close_clients",
    "collect_parts",
    "draw_indices",
    "file_size",
    "fingerprint",
    "ingest",
    "load_checkpoint",
    "make_checkerboard",
    "make_gauss",
    "make_pathological",
    "make_rings",
    "make_waveform",
    "open_dataset",
    "range_workers",
    "read_bytes",
    "sample_rows",
    "save_checkpoint",
    "take_rows",
    "write_array",
    "write_arrays",
    "write_bytes",
]
