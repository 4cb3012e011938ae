from __future__ import annotations

from fastapi.testclient import TestClient

import sessiongate


def test_healthz_reports_an_open_store(client):
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "store": "open", "version": sessiongate.__version__}


def test_healthz_is_503_once_the_store_is_closed(app, store):
    store.close()
    response = TestClient(app, base_url="http://127.0.0.1").get("/healthz")
    assert response.status_code == 503
    assert response.json()["store"] == "closed"
