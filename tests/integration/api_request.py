"""One request to wharfd's HTTP API, as a script written for RabbitMQ's management API makes it
(urllib, HTTP Basic, a JSON body), for the Python integration tests.
"""
import base64
import json
import time
import urllib.error
import urllib.request


def api_request(url, method="GET", user="guest", password="guest", body=None, raw=None,
                timeout=30):
    """(status, headers, body bytes) of `method` on `url` as `user` (None: no credentials),
    with `body` as JSON or `raw` bytes as they are. A 429 is retried for up to 5 s: after a
    wrong password, Wharf's login throttle holds the address's logins for 100 ms
    (docs/security.md)."""
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    request = urllib.request.Request(url, method=method, data=data)
    if data is not None:
        request.add_header("Content-Type", "application/json")
    if user is not None:
        token = base64.b64encode(("%s:%s" % (user, password)).encode()).decode()
        request.add_header("Authorization", "Basic " + token)
    for _ in range(100):
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                status, headers, reply = response.status, response.headers, response.read()
        except urllib.error.HTTPError as error:
            status, headers, reply = error.code, error.headers, error.read()
        if status != 429:
            break
        time.sleep(0.05)
    return status, headers, reply
