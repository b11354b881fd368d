"""Run with the unchanged python-zaqarclient (the compat virtualenv, or the
zaqar-client image in a pod): post two messages to a Queue the operator
created, claim them, delete them with the claim. Prints one JSON line; exits
non-zero on any failure.

Usage: zaqar_client_check.py URL PROJECT QUEUE. With $SLUICE_TOKEN, or a file
named by $SLUICE_TOKEN_FILE (a projected ServiceAccount token), the client
uses its keystone backend with that token and the URL, which sends the token
as X-Auth-Token and asks no identity service; without, its noauth backend
with PROJECT."""

import json
import os
import sys
import uuid

from zaqarclient.queues.v2 import client

url, project, name = sys.argv[1:4]
token = os.environ.get("SLUICE_TOKEN", "")
if not token and os.environ.get("SLUICE_TOKEN_FILE"):
    with open(os.environ["SLUICE_TOKEN_FILE"]) as f:
        token = f.read().strip()
if token:
    auth = {"backend": "keystone", "options": {"os_auth_token": token}}
else:
    auth = {"backend": "noauth", "options": {"os_project_id": project}}
c = client.Client(url, version=2, conf={"auth_opts": auth, "client_uuid": str(uuid.uuid4())})
q = c.queue(name)
q.post([{"body": {"n": 1}, "ttl": 300}, {"body": {"n": 2}, "ttl": 300}])
claim = q.claim(ttl=60, grace=60, limit=10)
bodies = sorted(m.body["n"] for m in claim)
for m in claim:
    m.delete()
print(json.dumps({"claimed": bodies, "stats": q.stats}))
sys.exit(0 if bodies == [1, 2] else 1)
