"""Serve Keystone's public WSGI application on 127.0.0.1:PORT with the
standard library's threaded WSGI server: no web server to install, and
enough for tests (Keystone's own deployments use uwsgi or mod_wsgi).

Runs in the Keystone venv; the configuration file comes from
OS_KEYSTONE_CONFIG_FILES, as Keystone's WSGI entry point expects.
"""

import sys
from socketserver import ThreadingMixIn
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

port = int(sys.argv[1])
# oslo.config parses sys.argv while the application initialises.
sys.argv = sys.argv[:1]

from keystone.server.wsgi import initialize_public_application  # noqa: E402

application = initialize_public_application()


class ThreadedServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class QuietHandler(WSGIRequestHandler):
    def log_message(self, *args):  # Keystone logs each request itself
        pass


make_server("127.0.0.1", port, application, server_class=ThreadedServer,
            handler_class=QuietHandler).serve_forever()
