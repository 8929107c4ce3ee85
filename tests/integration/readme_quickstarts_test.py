#!/usr/bin/python3
"""The README's AMQP quick starts, run as they are written there, against the real wharfd:
the Python one with Debian's pika, the Go one with Debian's amqp091-go (GOPATH mode, from
/usr/share/gocode), the Node one with amqplib from npm (tests/quickstarts/package-lock.json).

Run by ctest: readme_quickstarts_test.py WHARFD_PATH README_PATH. Each program is taken from
the README's section "From Python, Go or Node", written to a temporary directory and run with
AMQP_URL set to the test's wharfd; it must print "hello from <language>" and exit 0.
"""
import os
import re
import shutil
import subprocess
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
import tempfile
import unittest

from wharfd_process import Wharfd

WHARFD = None
README = None
HERE = os.path.dirname(os.path.abspath(__file__))


def quickstarts():
    """{language: source} of the fenced blocks in the README's quick start section."""
    with open(README) as f:
        text = f.read()
    start = text.index("## From Python, Go or Node")
    end = text.index("\n## ", start + 1)
    return dict(re.findall(r"```(python|go|js)\n(.*?)```", text[start:end], re.S))


class Quickstarts(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.broker = Wharfd(WHARFD)
        cls.code = quickstarts()
        cls.dir = tempfile.mkdtemp(prefix="wharf-quickstarts-")

    @classmethod
    def tearDownClass(cls):
        code = cls.broker.stop()
        shutil.rmtree(cls.dir, ignore_errors=True)
        if code != 0:
            print(cls.broker.read_log()[-20000:])
            raise AssertionError("wharfd exited with %d" % code)

    def run_program(self, args, cwd, env=None):
        env = dict(os.environ, AMQP_URL=self.broker.url(), **(env or {}))
        done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=240)
        self.assertEqual(done.returncode, 0, "%s\nstdout: %s\nstderr: %s\nwharfd: %s" % (
            args, done.stdout, done.stderr, self.broker.read_log()[-3000:]))
        return done.stdout

    def write(self, name, language):
        self.assertIn(language, self.code, "no %s block in the README's quick start" % language)
        directory = os.path.join(self.dir, language)
        os.makedirs(directory, exist_ok=True)
        with open(os.path.join(directory, name), "w") as f:
            f.write(self.code[language])
        return directory

    def test_python(self):
        directory = self.write("quickstart.py", "python")
        out = self.run_program([sys.executable, "quickstart.py"], directory)
        self.assertEqual(out, "hello from Python\n")

    def test_go(self):
        directory = self.write("quickstart.go", "go")
        out = self.run_program(
            ["go", "run", "quickstart.go"], directory,
            {"GO111MODULE": "off", "GOPATH": "/usr/share/gocode",
             "GOCACHE": os.path.join(self.dir, "gocache"), "GOFLAGS": ""})
        self.assertEqual(out, "hello from Go\n")

    def test_node(self):
        directory = self.write("quickstart.js", "js")
        for name in ("package.json", "package-lock.json"):
            shutil.copy(os.path.join(HERE, "..", "quickstarts", name), directory)
        self.run_program(["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"], directory)
        out = self.run_program(["node", "quickstart.js"], directory)
        self.assertEqual(out, "hello from Node\n")


if __name__ == "__main__":
    WHARFD = sys.argv.pop(1)
    README = sys.argv.pop(1)
    unittest.main(verbosity=2)
