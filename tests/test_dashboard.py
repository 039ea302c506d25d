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
