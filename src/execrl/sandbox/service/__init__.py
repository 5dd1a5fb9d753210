"""The sandbox over HTTP: execrl's JSON API and SandboxFusion's ``/run_code`` (``server.py``,
``fusion.py``), the session endpoints (``sessions.py``, ``jupyter.py``), the rules every JSON body
passes (``http_edge.py``), per-request caps (``caps.py``), JSON <-> dataclasses (``serialize.py``)
and a client for several replicas (``client.py``; its sessions, which tool episodes fork on a replica:
``client_sessions.py`` over ``session_wire.py``).
"""
