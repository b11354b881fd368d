"""Run with the compat virtualenv (python-zaqarclient, unchanged): post two
messages to a Queue the operator created, claim them, delete them with the
claim. Prints one JSON line; exits non-zero on any failure."""

import json
import sys
import uuid

from zaqarclient.queues.v2 import client

url, project, name = sys.argv[1:4]
conf = {"auth_opts": {"backend": "noauth", "options": {"os_project_id": project}}, "client_uuid": str(uuid.uuid4())}
c = client.Client(url, version=2, conf=conf)
q = c.queue(name)
q.post([{"body": {"n": 1}, "ttl": 300}, {"body": {"n": 2}, "ttl": 300}])
claim = q.claim(ttl=60, grace=60, limit=10)
bodies = sorted(m.body["n"] for m in claim)
for m in claim:
    m.delete()
print(json.dumps({"claimed": bodies, "stats": q.stats}))
sys.exit(0 if bodies == [1, 2] else 1)
