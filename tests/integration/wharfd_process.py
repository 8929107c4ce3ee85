"""A real wharfd for the Python integration tests: started on free loopback ports (or another
address of this machine's, for the loopback_guest test) with a temporary data directory (and an
optional config file), stopped with SIGTERM.
"""
import os
import shutil
import signal
import subprocess
import tempfile
import time


class Wharfd:
    def __init__(self, wharfd, config_text=None, host="127.0.0.1", extra_args=(), data_dir=None):
        """data_dir: another wharfd's `data`, to start on what it left (a restart)."""
        self.dir = tempfile.mkdtemp(prefix="wharf-py-")
        self.config = os.path.join(self.dir, "wharfd.toml")
        self.data = data_dir or os.path.join(self.dir, "data")
        ready = os.path.join(self.dir, "ready")
        args = [wharfd, "--listen", host + ":0", "--amqp-listen", host + ":0", "--data-dir",
                self.data, "--ready-file", ready, "--log-level", "debug", *extra_args]
        if config_text is not None:
            self.write_config(config_text)
            args += ["--config", self.config]
        self.log = open(os.path.join(self.dir, "wharfd.log"), "wb")
        self.process = subprocess.Popen(args, stdout=self.log, stderr=self.log)
        deadline = time.time() + 20
        self.amqp_port = None
        # "native" (the first line), "amqp", "amqps", "tls", "metrics", "https" -> port, as the
        # ready file says
        self.ports = {}
        while time.time() < deadline and self.amqp_port is None:
            if os.path.exists(ready):
                with open(ready) as f:
                    for line in f:
                        if " " in line:
                            name, address = line.split(" ", 1)
                            self.ports[name] = int(address.rsplit(":", 1)[1])
                        elif ":" in line:
                            self.ports["native"] = int(line.rsplit(":", 1)[1])
                self.amqp_port = self.ports.get("amqp")
            time.sleep(0.02)
        if self.amqp_port is None:
            raise RuntimeError("wharfd did not start:\n" + self.read_log())

    def url(self):
        return "amqp://guest:guest@127.0.0.1:%d/" % self.amqp_port

    def write_config(self, text):
        """Replaces the config file at once (a SIGHUP then reloads what may change live)."""
        with open(self.config + ".tmp", "w") as f:
            f.write(text)
        os.replace(self.config + ".tmp", self.config)

    def reload(self):
        self.process.send_signal(signal.SIGHUP)

    def read_log(self):
        with open(os.path.join(self.dir, "wharfd.log"), errors="replace") as f:
            return f.read()

    def stop_and_remove(self):
        """stop(); then the log's tail printed when the exit was not clean, and the directory
        removed. The exit code."""
        code = self.stop()
        if code != 0:
            print(self.read_log()[-20000:])
        shutil.rmtree(self.dir, ignore_errors=True)
        return code

    def stop(self):
        """SIGTERM; the exit code (-1 when it had to be killed)."""
        self.process.send_signal(signal.SIGTERM)
        try:
            code = self.process.wait(20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = -1
        self.log.close()
        return code


def across_kill_9(wharfd, before, after, extra_args=("--metrics-listen", "127.0.0.1:0")):
    """Runs before(first) against a wharfd of its own, kills it -9, starts another on its data
    directory and runs after(second) against that; both are removed after. Raises when the
    second does not stop cleanly."""
    first = Wharfd(wharfd, extra_args=list(extra_args))
    try:
        before(first)
        first.process.kill()
        first.process.wait()
        first.log.close()
        second = Wharfd(wharfd, extra_args=list(extra_args), data_dir=first.data)
        try:
            after(second)
        finally:
            code = second.stop()
            shutil.rmtree(second.dir, ignore_errors=True)
        if code != 0:
            raise AssertionError("the wharfd after the kill exited %d" % code)
    finally:
        if first.process.poll() is None:
            first.process.kill()
        shutil.rmtree(first.dir, ignore_errors=True)
