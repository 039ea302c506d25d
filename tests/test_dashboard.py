"""The Dask dashboard that every entry point links to renders (bokeh is installed)."""

from __future__ import annotations

import urllib.request

from distributed import Client, LocalCluster


def test_dashboard_status_page_renders():
    cluster = LocalCluster(
        n_workers=1,
        threads_per_worker=1,
        processes=False,
        protocol="tcp://",
        host="127.0.0.1",
        dashboard_address="127.0.0.1:0",
    )
    try:
        with Client(cluster, set_as_default=False) as client:
            link = client.dashboard_link
            assert link.startswith("http://127.0.0.1:") and link.endswith("/status")
            with urllib.request.urlopen(link, timeout=30) as resp:
                assert resp.status == 200
                page = resp.read().decode("utf-8", "replace")
    finally:
        cluster.close()
    assert "needs bokeh" not in page.lower()
    assert "bokeh" in page.lower()  # the Bokeh document that draws the status plots
    assert "<html" in page.lower()


def test_embedded_client_dashboard_renders(monkeypatch):
    """The link dkernel's own entry point (get_client) logs opens a working dashboard."""
    from dkernel.runtime import get_client

    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS", raising=False)
    client = get_client(n_workers=1, processes=False)
    try:
        with urllib.request.urlopen(client.dashboard_link, timeout=30) as resp:
            page = resp.read().decode("utf-8", "replace")
    finally:
        cluster = client.cluster
        client.close()
        cluster.close()
    assert "needs bokeh" not in page.lower() and "bokeh" in page.lower()


def test_groups_page_open_during_work_leaves_stderr_clean(monkeypatch, capfd):
    """With the dashboard's Groups page open (a bokeh client session on /groups, as a browser
    tab holds one) during ordinary work, the upstream KeyError of the page's layout
    (docs/upstream/groups-page-keyerror.md) reaches neither stderr nor the log: the
    reproduction reproduces (the filter dropped records) and stderr has no traceback."""
    import time
    import warnings

    import dask.array as da
    import numpy as np
    from bokeh.client import pull_session

    from dkernel.runtime import GroupsLayoutFilter, get_client

    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS", raising=False)
    client = get_client(n_workers=2, processes=False, new=True)
    before = GroupsLayoutFilter.dropped
    try:
        url = client.dashboard_link.replace("/status", "/groups")
        with warnings.catch_warnings():
            # bokeh's client makes its own tornado IOLoop, which Python 3.12 deprecates
            warnings.simplefilter("ignore", DeprecationWarning)
            session = pull_session(url=url)
        with session:
            assert session.document.roots  # the page's plot
            x = da.from_array(np.random.default_rng(0).random((20_000, 20)), chunks=2_000)
            t0 = time.monotonic()
            while GroupsLayoutFilter.dropped == before and time.monotonic() - t0 < 60:
                (x @ x.T[:, :100]).sum().compute()
                x.mean(axis=0).compute()
    finally:
        cluster = client.cluster
        client.close()
        cluster.close()
    err = capfd.readouterr().err
    assert GroupsLayoutFilter.dropped > before, "the Groups page raised nothing to filter"
    assert "Traceback" not in err and "KeyError" not in err, err[-2000:]
