"""A throw-away PostgreSQL cluster for the tests: initdb into a temporary folder, a free
loopback port, trust authentication for the one user "memproxy" on 127.0.0.1 only, stopped
(and removed) at the end. Debian's server binaries (/usr/lib/postgresql/*/bin) are used; the
package's own cluster is never touched.

As a program (scripts/test):   pgcluster.py start DIR   prints the server's base URL
                               pgcluster.py stop DIR
As a module (tests/integration/harness.py): Cluster() ... .url ... .stop()
"""
import glob
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import time


def bindir():
    for d in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if os.path.exists(os.path.join(d, "initdb")):
            return d
    raise RuntimeError("no PostgreSQL server found (apt-get install postgresql)")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def _as_owner(cmd):
    """PostgreSQL refuses to run as root: as root, run as the postgres user."""
    if os.geteuid() != 0:
        return cmd
    return ["runuser", "-u", "postgres", "--"] + cmd


class Cluster:
    def __init__(self, where=None, port=None):
        self.dir = where or tempfile.mkdtemp(prefix="memproxy-pg-")
        os.makedirs(self.dir, exist_ok=True)
        if os.geteuid() == 0:
            pw = pwd.getpwnam("postgres")
            os.chown(self.dir, pw.pw_uid, pw.pw_gid)
        self.data = os.path.join(self.dir, "data")
        self.port = port or free_port()
        b = bindir()
        log = os.path.join(self.dir, "initdb.log")
        with open(log, "w") as f:
            subprocess.run(_as_owner([os.path.join(b, "initdb"), "-D", self.data, "-U", "memproxy",
                                      "--auth=trust", "-E", "UTF8", "--no-sync"]),
                           stdout=f, stderr=subprocess.STDOUT, check=True)
        # fsync stays on: the durability tests kill memproxy, not the server, but the figures
        # bench/ takes must be a real server's
        self.start()
        self.url = "postgresql://memproxy@127.0.0.1:%d" % self.port
        with open(os.path.join(self.dir, "url"), "w") as f:
            f.write(self.url)

    def start(self):
        """Start the server (again, after stop(remove=False)) on its port."""
        opts = ("-p %d -k %s -c listen_addresses=127.0.0.1 -c max_connections=200 "
                "-c shared_buffers=64MB" % (self.port, self.dir))
        subprocess.run(_as_owner([os.path.join(bindir(), "pg_ctl"), "-D", self.data, "-o", opts,
                                  "-l", os.path.join(self.dir, "server.log"), "-w", "-t", "120",
                                  "start"]),
                       stdout=subprocess.DEVNULL, check=True)

    def create_db(self, name):
        """A new, empty database; its URL."""
        self.psql("postgres", 'CREATE DATABASE "%s"' % name)
        return "%s/%s" % (self.url, name)

    def psql(self, db, sql):
        out = subprocess.run([os.path.join(bindir(), "psql"), "-X", "-At", "-v",
                              "ON_ERROR_STOP=1", "%s/%s" % (self.url, db), "-c", sql],
                             capture_output=True, text=True, timeout=120)
        if out.returncode != 0:
            raise RuntimeError("psql: %s" % out.stderr.strip())
        return out.stdout

    def stop(self, remove=True):
        stop(self.dir, remove)


class Bouncer:
    """PgBouncer (Debian's) in transaction pooling in front of a cluster: pool_size server
    connections for all its clients, on a free loopback port."""

    def __init__(self, cluster, pool_size=2):
        self.dir = tempfile.mkdtemp(prefix="memproxy-pgbouncer-")
        self.port = free_port()
        conf = os.path.join(self.dir, "pgbouncer.ini")
        with open(conf, "w") as f:
            f.write("[databases]\n* = host=127.0.0.1 port=%d\n[pgbouncer]\n"
                    "listen_addr = 127.0.0.1\nlisten_port = %d\nunix_socket_dir =\n"
                    "auth_type = trust\nauth_file = %s\npool_mode = transaction\n"
                    "default_pool_size = %d\nmax_client_conn = 200\n"
                    "ignore_startup_parameters = options\nlogfile = %s\n"
                    % (cluster.port, self.port, os.path.join(self.dir, "users.txt"), pool_size,
                       os.path.join(self.dir, "log")))
        with open(os.path.join(self.dir, "users.txt"), "w") as f:
            f.write('"memproxy" ""\n')
        if os.geteuid() == 0:
            pw = pwd.getpwnam("postgres")
            for name in (self.dir, conf, os.path.join(self.dir, "users.txt")):
                os.chown(name, pw.pw_uid, pw.pw_gid)
        self.proc = subprocess.Popen(_as_owner([shutil.which("pgbouncer") or
                                                "/usr/sbin/pgbouncer", conf]),
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)
        self.url = "postgresql://memproxy@127.0.0.1:%d" % self.port

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)
        shutil.rmtree(self.dir, True)


def stop(where, remove=True):
    data = os.path.join(where, "data")
    if os.path.exists(os.path.join(data, "postmaster.pid")):
        subprocess.run(_as_owner([os.path.join(bindir(), "pg_ctl"), "-D", data, "-m", "immediate",
                                  "-w", "stop"]),
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if remove:
        shutil.rmtree(where, True)


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("start", "stop"):
        sys.exit("usage: pgcluster.py start|stop DIR")
    if sys.argv[1] == "start":
        print(Cluster(sys.argv[2]).url)
    else:
        stop(sys.argv[2])
