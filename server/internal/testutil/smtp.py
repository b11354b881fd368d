"""A loopback SMTP server for sluice's tests: prints one JSON line per
message received ({"from", "to", "data"}) after a {"ready": port} line.
Uses aiosmtpd when installed (mk/server.mk puts it in a venv), else the
smtpd module Python <= 3.11 still ships."""
import json
import sys

port = int(sys.argv[1])


def emit(mail_from, rcpt_tos, data):
    if isinstance(data, bytes):
        data = data.decode("utf-8", "replace")
    print(json.dumps({"from": mail_from, "to": list(rcpt_tos), "data": data}), flush=True)


try:
    from aiosmtpd.controller import Controller
except ImportError:
    Controller = None

if Controller is not None:
    class Handler:
        async def handle_DATA(self, server, session, envelope):
            emit(envelope.mail_from, envelope.rcpt_tos, envelope.content)
            return "250 OK"

    controller = Controller(Handler(), hostname="127.0.0.1", port=port)
    controller.start()
    print(json.dumps({"ready": port, "impl": "aiosmtpd"}), flush=True)
    try:
        sys.stdin.read()
    finally:
        controller.stop()
else:
    import asyncore
    import smtpd

    class Server(smtpd.SMTPServer):
        def process_message(self, peer, mailfrom, rcpttos, data, **kwargs):
            emit(mailfrom, rcpttos, data)

    Server(("127.0.0.1", port), None, decode_data=False)
    print(json.dumps({"ready": port, "impl": "smtpd"}), flush=True)
    asyncore.loop()
