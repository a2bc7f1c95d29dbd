"""A real single-node Kubernetes cluster for the tests (issue 18), started and stopped by them.

Components: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubelet and kube-proxy
(v1.34.4, built by ``tests/kube/build``), containerd and runc (Debian packages) with the CNI
bridge plugin (Debian's containernetworking-plugins), and a real Prometheus 3.16 (built from its
Go module with Kubernetes service discovery: Debian's ``prometheus`` 2.42 is built without it). Images come from ``tests/kube/images`` as docker-archive files imported into
containerd: no registry.

How it stays off the machine (the developers' guide: tests change no kernel setting, send no
traffic beyond what they create, look up no names, stop what they start):

* **Network.** Everything runs in a network namespace of its own (held open by a ``sleep``
  started with ``unshare --net``, so no ``/run/netns`` entry or mount is made) with no route
  out: the node's bridge ``rfkbr0`` (node IP :data:`NODE_IP`, pods in :data:`POD_CIDR`, the
  bridge plugin with ``isGateway: false``) and a veth pair to the test process
  (``host_ip`` here, ``ns_ip`` there, a free /30 of :data:`VETH_RANGE`). The ranges are RFC 2544's benchmarking block
  (198.18.0.0/15), which cannot collide with the machine's 10.0.0.0/8. iptables rules (kube-proxy's,
  the CNI plugins'), ``ip_forward`` and every other ``net.*`` setting belong to that namespace and
  go with it. No cluster DNS: pods get an empty resolver configuration (``resolvConf: ""``) and
  the apiserver reaches the kubelet by IP (``--kubelet-preferred-address-types=InternalIP``).
* **Kernel settings.** The kubelet writes ``vm.overcommit_memory``, ``vm.panic_on_oom``,
  ``kernel.panic``, ``kernel.panic_on_oops`` and ``kernel.keys.root_max{keys,bytes}`` at start
  (pkg/kubelet/cm's setupKernelTunables). containerd, the kubelet and kube-proxy run in a mount
  namespace of their own where stand-in files are bind-mounted over those ``/proc/sys`` entries,
  so the writes land there; :func:`host_sysctls` reads the real ones and the tests compare them
  before and after. kube-proxy runs with ``conntrack`` limits zeroed (it then leaves
  ``nf_conntrack_max`` and the hash size alone) and ``localhostNodePorts: false``.
* **Processes, mounts, cgroups.** Every process is started here and stopped by PID
  (SIGTERM, then SIGKILL), the containerd shims too (found by the mount namespace they share
  with containerd); the pods' mounts live in that mount namespace and end with it. There,
  tmpfs covers ``/run`` (pod network namespaces, runc's state, the shims' sockets),
  ``/var/log`` (pod logs), ``/var/lib/cni`` (the CNI cache) and ``/var/lib/kubelet`` (the
  device-plugin socket, there whatever the kubelet's ``--root-dir``), so nothing is written to
  the host's; a mount point this makes on the host is removed again by the last run to stop
  (:func:`release_made_dirs`: removing it under another run's mount would detach that mount).
  The kubelet and runc keep their cgroups under ``/rf-kube-<pid>`` in each hierarchy, removed
  at the end.
  :meth:`Cluster.stop` runs also when start-up fails half way.

The cluster part takes about a minute with warm caches (see the README for the measured
figures); building the binaries and images the first time takes 10–25 minutes on 2 cores.
"""

from __future__ import annotations

import contextlib
import datetime
import ipaddress
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
KUBE_VERSION = "v1.34.4"
#: The node's address on its bridge (also the apiserver's advertise address).
NODE_IP = "198.18.0.1"
POD_CIDR = "198.18.0.0/24"
SERVICE_CIDR = "198.19.0.0/24"
#: The apiserver's Service IP (the first of SERVICE_CIDR).
SERVICE_IP = "198.19.0.1"
#: The veth pairs between test processes and clusters' namespaces take /30s of this range, one
#: per running cluster (:func:`_free_veth_net`): two runs on one machine do not collide.
VETH_RANGE = "198.18.128.0/17"
NODE_NAME = "rf-node"
BRIDGE = "rfkbr0"
#: The kernel settings the kubelet writes at start (and the values it writes).
KUBELET_SYSCTLS = ("vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic",
                   "kernel/panic_on_oops", "kernel/keys/root_maxkeys",
                   "kernel/keys/root_maxbytes")
PROMETHEUS_PORT = 9090
DEBIAN_PACKAGES = ("containerd", "runc", "containernetworking-plugins", "mmdebstrap", "buildah",
                   "iptables", "conntrack")


class ClusterError(RuntimeError):
    """The cluster could not be built, started or reached; the message names the step and
    quotes the component's log tail."""


def cache_dir() -> Path:
    """``$REPEAT_FAILURE_CACHE`` or ``~/.cache/repeat-failure``: where binaries and images are
    kept between runs."""
    return Path(os.environ.get("REPEAT_FAILURE_CACHE",
                               Path.home() / ".cache" / "repeat-failure"))


def missing_prerequisites() -> list[str]:
    """What this machine lacks to run the cluster: root, the Debian packages' commands, Go (to
    build the binaries), ``ip``/``nsenter``/``unshare``. Empty when all is there."""
    missing = []
    if os.geteuid() != 0:
        missing.append("root")
    for command in ("containerd", "runc", "ctr", "mmdebstrap", "buildah", "iptables", "ip",
                    "nsenter", "unshare"):
        if shutil.which(command) is None:
            missing.append(command)
    if not Path("/usr/lib/cni/bridge").exists():
        missing.append("/usr/lib/cni/bridge (containernetworking-plugins)")
    if shutil.which("go") is None and not Path("/usr/local/go/bin/go").exists():
        missing.append("go")
    return missing


def host_sysctls() -> dict[str, str]:
    """The host's values of :data:`KUBELET_SYSCTLS` plus ``net/ipv4/ip_forward``, as read from
    this process's ``/proc/sys`` (the host's: the test process is in no namespace of ours)."""
    keys = KUBELET_SYSCTLS + ("net/ipv4/ip_forward",)
    return {key: Path("/proc/sys", key).read_text().strip() for key in keys}


def build_binaries() -> Path:
    """Run ``tests/kube/build``; returns the directory holding the binaries. Raises
    :class:`ClusterError` with the build's output tail when it fails."""
    out = subprocess.run([str(HERE / "build")], capture_output=True, text=True, umask=0o022)
    if out.returncode != 0:
        raise ClusterError(f"tests/kube/build failed:\n{out.stderr[-4000:]}")
    return Path(out.stdout.strip().splitlines()[-1])


def build_images(bin_dir: Path) -> Path:
    """Run ``tests/kube/images``; returns the directory of the docker-archive files (``base``,
    ``pause``, ``image``). Raises :class:`ClusterError` with the output tail on failure."""
    out = subprocess.run([str(HERE / "images"), str(bin_dir)], capture_output=True, text=True,
                         umask=0o022)
    if out.returncode != 0:
        raise ClusterError(f"tests/kube/images failed:\n{out.stderr[-4000:]}")
    return Path(out.stdout.strip().splitlines()[-1])


# -- certificates ---------------------------------------------------------------------------------


@dataclass
class Pki:
    """The cluster's certificates, written as PEM files into ``root``: one CA signs the
    apiserver's and the kubelet's serving certificates and every client certificate (the
    components authenticate with x509, as kubeadm sets them up); ``sa`` is the service-account
    token signing key. EC P-256 keys (fast to make; every component accepts them)."""

    root: Path
    ca_key: object = None
    ca_cert: object = None

    def __post_init__(self) -> None:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID
        self._x509, self._hashes, self._ser, self._ec, self._oid = (
            x509, hashes, serialization, ec, NameOID)
        self.root.mkdir(parents=True, exist_ok=True)
        self.ca_key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "repeat-failure-test-ca")])
        now = datetime.datetime.now(datetime.timezone.utc)
        self.ca_cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
                        .public_key(self.ca_key.public_key())
                        .serial_number(x509.random_serial_number())
                        .not_valid_before(now - datetime.timedelta(minutes=5))
                        .not_valid_after(now + datetime.timedelta(days=2))
                        .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
                        .add_extension(x509.KeyUsage(True, False, False, False, False, True,
                                                     True, False, False), True)
                        .sign(self.ca_key, hashes.SHA256()))
        self._write("ca.crt", self.ca_cert.public_bytes(serialization.Encoding.PEM))
        sa = ec.generate_private_key(ec.SECP256R1())
        self._write("sa.key", self._key_pem(sa))
        self._write("sa.pub", sa.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
        self._write("ca.key", self._key_pem(self.ca_key))

    def _write(self, name: str, data: bytes) -> Path:
        path = self.root / name
        path.write_bytes(data)
        path.chmod(0o600)
        return path

    def _key_pem(self, key) -> bytes:
        return key.private_bytes(self._ser.Encoding.PEM, self._ser.PrivateFormat.PKCS8,
                                 self._ser.NoEncryption())

    def issue(self, name: str, cn: str, orgs: tuple[str, ...] = (), *, dns: tuple[str, ...] = (),
              ips: tuple[str, ...] = (), server: bool = False) -> tuple[Path, Path]:
        """A certificate for ``cn`` (organizations ``orgs``: Kubernetes' groups) signed by the
        CA; ``server`` adds the serving usage and the ``dns``/``ips`` alternative names.
        Returns ``(cert path, key path)`` (``<name>.crt``, ``<name>.key``)."""
        x509, oid = self._x509, self._oid
        key = self._ec.generate_private_key(self._ec.SECP256R1())
        attrs = [x509.NameAttribute(oid.ORGANIZATION_NAME, o) for o in orgs]
        attrs.append(x509.NameAttribute(oid.COMMON_NAME, cn))
        now = datetime.datetime.now(datetime.timezone.utc)
        builder = (x509.CertificateBuilder().subject_name(x509.Name(attrs))
                   .issuer_name(self.ca_cert.subject).public_key(key.public_key())
                   .serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(minutes=5))
                   .not_valid_after(now + datetime.timedelta(days=1))
                   .add_extension(x509.BasicConstraints(ca=False, path_length=None), True))
        usages = [x509.ExtendedKeyUsageOID.CLIENT_AUTH]
        if server:
            usages.append(x509.ExtendedKeyUsageOID.SERVER_AUTH)
            names = [x509.DNSName(d) for d in dns]
            names += [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
            builder = builder.add_extension(x509.SubjectAlternativeName(names), False)
        builder = builder.add_extension(x509.ExtendedKeyUsage(usages), False)
        cert = builder.sign(self.ca_key, self._hashes.SHA256())
        return (self._write(f"{name}.crt", cert.public_bytes(self._ser.Encoding.PEM)),
                self._write(f"{name}.key", self._key_pem(key)))

    def kubeconfig(self, name: str, cn: str, orgs: tuple[str, ...] = (),
                   server: str = f"https://{NODE_IP}:6443") -> Path:
        """A kubeconfig file ``<name>.kubeconfig`` for a client certificate of ``cn``/``orgs``
        talking to ``server``."""
        cert, key = self.issue(name, cn, orgs)
        config = {"apiVersion": "v1", "kind": "Config", "current-context": "rf",
                  "clusters": [{"name": "rf", "cluster": {
                      "server": server, "certificate-authority": str(self.root / "ca.crt")}}],
                  "users": [{"name": name, "user": {"client-certificate": str(cert),
                                                    "client-key": str(key)}}],
                  "contexts": [{"name": "rf", "context": {"cluster": "rf", "user": name}}]}
        path = self.root / f"{name}.kubeconfig"
        path.write_text(yaml.safe_dump(config))
        path.chmod(0o600)
        return path


# -- the cluster ----------------------------------------------------------------------------------


@dataclass
class Process:
    """One started component: its name, the ``subprocess.Popen`` and its log file."""

    name: str
    popen: subprocess.Popen
    log: Path

    def tail(self, chars: int = 3000) -> str:
        """The last ``chars`` characters of the component's log."""
        try:
            return self.log.read_text(errors="replace")[-chars:]
        except OSError:
            return ""


@dataclass
class Cluster:
    """The cluster's state while it runs. Make one with :func:`start`; always :meth:`stop` it
    (also after a failed start). ``kubeconfig`` is the admin's (system:masters) for this
    process (server ``https://<ns_ip>:6443`` over the veth pair); ``env`` has ``KUBECONFIG`` set
    and the binaries first on ``PATH``."""

    work: Path
    bin_dir: Path
    cgroup: str
    tag: str = ""
    host_ip: str = ""
    ns_ip: str = ""
    netns_pid: int = 0
    made_dirs: list[Path] = field(default_factory=list)
    processes: list[Process] = field(default_factory=list)
    kubeconfig: Path | None = None
    pki: Pki | None = None
    veth: str = ""
    containerd_pid: int = 0
    timings: dict[str, float] = field(default_factory=dict)

    # .. running things ...........................................................................

    @property
    def env(self) -> dict[str, str]:
        """The environment for ``kubectl``/``helm`` run by the tests. Their discovery and HTTP
        caches (``KUBECACHEDIR``, else ``~/.kube/cache``) go to the work directory, so nothing
        is written under the machine's ``$HOME``."""
        return {**os.environ, "KUBECONFIG": str(self.kubeconfig),
                "KUBECACHEDIR": str(self.work / "kube-cache"),
                "PATH": f"{self.bin_dir}:{cache_dir() / 'bin'}:{os.environ.get('PATH', '')}",
                "HELM_CACHE_HOME": str(self.work / "helm" / "cache"),
                "HELM_CONFIG_HOME": str(self.work / "helm" / "config"),
                "HELM_DATA_HOME": str(self.work / "helm" / "data")}

    def in_netns(self, argv: list[str]) -> list[str]:
        """``argv`` run in the cluster's network namespace (only)."""
        return ["nsenter", f"--net=/proc/{self.netns_pid}/ns/net", "--", *argv]

    def in_node(self, argv: list[str]) -> list[str]:
        """``argv`` run in the node's network and mount namespaces (where containerd runs)."""
        return ["nsenter", "-t", str(self.containerd_pid), "--mount", "--net", "--", *argv]

    def kubectl(self, *args: str, input: str | None = None, check: bool = True,
                timeout: float = 120) -> subprocess.CompletedProcess:
        """``kubectl ARGS`` as the admin; raises :class:`ClusterError` with its output when it
        fails and ``check``."""
        out = subprocess.run([str(self.bin_dir / "kubectl"), *args], env=self.env, input=input,
                             capture_output=True, text=True, timeout=timeout)
        if check and out.returncode != 0:
            raise ClusterError(f"kubectl {' '.join(args)}: {out.stderr.strip()}")
        return out

    def _crictl_argv(self, *args: str, timeout: str = "30s") -> list[str]:
        """``crictl ARGS`` against the node's containerd, in the node's namespaces."""
        return self.in_node([str(self.bin_dir / "crictl"), "--runtime-endpoint",
                             f"unix://{self.work / 'containerd.sock'}", "--timeout", timeout,
                             *args])

    def crictl(self, *args: str) -> subprocess.CompletedProcess:
        """``crictl ARGS`` against the node's containerd; raises :class:`ClusterError` on
        failure."""
        out = subprocess.run(self._crictl_argv(*args), capture_output=True, text=True,
                             timeout=60)
        if out.returncode != 0:
            raise ClusterError(f"crictl {' '.join(args)}: {out.stderr.strip()}")
        return out

    def get_json(self, *args: str) -> dict:
        """``kubectl get ARGS -o json`` parsed."""
        return json.loads(self.kubectl("get", *args, "-o", "json").stdout)

    def raw(self, path: str, timeout: float = 30) -> str:
        """``kubectl get --raw PATH`` (an apiserver path, e.g. a pod's proxy subresource)."""
        return self.kubectl("get", "--raw", path, timeout=timeout).stdout

    def prometheus(self, path: str) -> dict:
        """GET ``http://<ns_ip>:9090<path>`` from the real Prometheus, parsed JSON."""
        with urllib.request.urlopen(f"http://{self.ns_ip}:{PROMETHEUS_PORT}{path}",
                                    timeout=10) as r:
            return json.loads(r.read())

    def _spawn(self, name: str, argv: list[str], *, env: dict[str, str] | None = None,
               cwd: Path | None = None) -> Process:
        log = self.work / "logs" / f"{name}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        handle = log.open("ab")
        # umask 022 whatever the caller's (the tests run with 007): containerd unpacks image
        # layers with it, and a non-root container cannot run files its group/others cannot read.
        popen = subprocess.Popen(argv, stdout=handle, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL, env=env or _clean_env(self.tag),
                                 cwd=cwd or self.work, start_new_session=True, umask=0o022)
        handle.close()
        process = Process(name, popen, log)
        self.processes.append(process)
        return process

    def wait_for(self, what: str, check, timeout: float, process: Process | None = None,
                 interval: float = 0.25):
        """Poll ``check()`` until it returns a truthy value (returned) or ``timeout`` seconds
        pass (:class:`ClusterError` naming ``what``, with ``process``'s log tail). Stops early
        when ``process`` has exited."""
        deadline = time.monotonic() + timeout
        last: Exception | None = None
        while time.monotonic() < deadline:
            if process is not None and process.popen.poll() is not None:
                raise ClusterError(f"{process.name} exited ({process.popen.returncode}) while "
                                   f"waiting for {what}:\n{process.tail()}")
            try:
                value = check()
                if value:
                    return value
            except Exception as exc:  # noqa: BLE001 - the last error is reported
                last = exc
            time.sleep(interval)
        tail = f"\n{process.name} log:\n{process.tail()}" if process else ""
        raise ClusterError(f"timed out after {timeout:.0f} s waiting for {what}"
                           f"{f' (last error: {last})' if last else ''}{tail}")

    # .. stopping ..................................................................................

    def stop(self) -> list[str]:
        """Stop everything this cluster started, in reverse order, and remove what it made:
        pods and containers (via the API and CRI while they answer), every process by PID
        (SIGTERM, 10 s, SIGKILL), the containerd shims (processes left in containerd's mount
        namespace), the cgroups under :attr:`cgroup`, the veth pair and the network namespace,
        and the work directory. Returns what could not be removed (empty when all went)."""
        problems: list[str] = []
        mnt_ns = _ns_inode(self.containerd_pid, "mnt") if self.containerd_pid else None
        # The kubelet first, so nothing restarts what is stopped next; then every pod sandbox
        # and container through the CRI while containerd still answers.
        for process in self.processes:
            if process.name == "kubelet":
                _stop_pid(process.popen)
        if self.containerd_pid and _ns_inode(self.containerd_pid, "mnt") == mnt_ns:
            with contextlib.suppress(Exception):
                subprocess.run(self._crictl_argv("rmp", "-fa", timeout="20s"),
                               capture_output=True, timeout=90)
        for process in reversed(self.processes):
            _stop_pid(process.popen)
        # What is left: container processes (each in a PID and mount namespace of its own, so
        # found by their cgroup) and the containerd shims (in containerd's mount namespace).
        left = _kill_cgroup_processes(self.cgroup)
        if left:
            problems.append(f"processes still in the cgroups {self.cgroup}: {left}")
        if mnt_ns is not None:
            for pid in _pids_in_mount_ns(mnt_ns):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            deadline = time.monotonic() + 10
            while _pids_in_mount_ns(mnt_ns) and time.monotonic() < deadline:
                time.sleep(0.1)
            still = _pids_in_mount_ns(mnt_ns)
            if still:
                problems.append(f"processes still in the node's mount namespace: {still}")
        problems += _remove_cgroups(self.cgroup)
        if self.veth:  # gone with the namespace; deleting it first is harmless
            subprocess.run(["ip", "link", "del", self.veth], capture_output=True)
        problems += release_made_dirs(self.tag)
        shutil.rmtree(self.work, ignore_errors=True)
        if self.work.exists():
            problems.append(f"work directory left: {self.work}")
        return problems


#: The environment variable that marks every process a cluster starts with its run's tag (the
#: starting test process's PID), so :func:`reap_stale` can find a killed run's processes.
RUN_MARK = "REPEAT_FAILURE_KUBE_RUN"


def _clean_env(tag: str) -> dict[str, str]:
    """The components' environment: a plain PATH and no proxy settings (nothing they do may
    leave the machine), no KUBECONFIG of the caller's, and :data:`RUN_MARK`."""
    return {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "HOME": "/root", "LANG": "C.UTF-8", RUN_MARK: tag}


@contextlib.contextmanager
def sigterm_as_interrupt():
    """While inside, SIGTERM (what a CI job's timeout or ``kill`` sends) raises
    KeyboardInterrupt in the main thread, as SIGINT does, so the tests' teardown still stops
    the cluster (Python's default for SIGTERM is to die at once, leaving every component
    running until :func:`reap_stale`). The previous handler comes back on leaving."""
    def interrupt(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")
    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def run_tag(pid: int | str) -> str | None:
    """The :data:`RUN_MARK` tag in process ``pid``'s environment (None: unmarked, or gone)."""
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return None
    mark = RUN_MARK.encode() + b"="
    return next((item[len(mark):].decode() for item in environ if item.startswith(mark)), None)


def _alive(pid: int) -> bool:
    return Path(f"/proc/{pid}").exists()


#: Markers of the mount points a run made on the machine (``/var/lib/cni`` where it did not
#: exist), one file each naming the directory. Runs share such a directory: each mounts over it
#: in its own mount namespace, and removing it while another run is up would detach that run's
#: mount (Linux detaches mounts on a directory removed in another namespace) and send its
#: writes to the machine's disk. So the last run to stop removes it (:func:`release_made_dirs`).
MADE_DIRS = Path("/tmp/rf-kube-made")


def _made_mark(path: Path) -> Path:
    return MADE_DIRS / str(path).strip("/").replace("/", ".")


def other_live_runs(tag: str | None, tmp: Path = Path("/tmp")) -> list[str]:
    """Tags of the cluster runs other than ``tag`` whose test process is alive (their work
    directories ``<tmp>/rf-kube-<tag>-*``)."""
    tags = {w.name.split("-")[2] for w in tmp.glob("rf-kube-*-*")}
    return sorted(t for t in tags if t.isdigit() and t != tag and _alive(int(t)))


def release_made_dirs(tag: str | None, marks: Path = MADE_DIRS,
                      tmp: Path = Path("/tmp")) -> list[str]:
    """Remove the mount points runs made (markers in ``marks``) unless another live run
    (:func:`other_live_runs`) may still have its mount there: each directory goes with the
    empty directories under it (what the pods' CNI cache leaves when a mount was detached);
    a file in it is never removed, but reported. Returns what could not be removed."""
    if not marks.is_dir() or other_live_runs(tag, tmp):
        return []
    problems = []
    for mark in sorted(marks.iterdir()):
        made = Path(mark.read_text().strip())
        if made.is_dir():
            for dirpath, _dirs, _files in sorted(os.walk(made), key=lambda t: -t[0].count("/")):
                with contextlib.suppress(OSError):
                    os.rmdir(dirpath)
        if made.exists():
            problems.append(f"mount point left, not empty: {made}")
        else:
            mark.unlink()
    with contextlib.suppress(OSError):
        marks.rmdir()
    return problems


def reap_stale() -> list[str]:
    """Clean up after earlier runs whose test process is gone (killed before its teardown):
    processes carrying :data:`RUN_MARK` with a dead run's tag, processes in a dead run's
    cgroups (``/rf-kube-<pid>``), those cgroups, its veth (``rfkh<pid>``), its work
    directory (``/tmp/rf-kube-<pid>-*``) and, when no run is up, the mount points runs made
    (:func:`release_made_dirs`). A run whose process is alive is left alone. Returns
    what was removed, one line each."""
    done: list[str] = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        tag = run_tag(entry)
        if tag is not None and tag.isdigit() and not _alive(int(tag)):
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(entry), signal.SIGKILL)
                done.append(f"killed {entry} of run {tag}")
    tags = {p.name.removeprefix("rf-kube-") for p in Path("/sys/fs/cgroup").glob("*/rf-kube-*")}
    for tag in sorted(t for t in tags if t.isdigit() and not _alive(int(t))):
        left = _kill_cgroup_processes(f"/rf-kube-{tag}")
        _remove_cgroups(f"/rf-kube-{tag}")
        done.append(f"removed the cgroups of run {tag}" + (f" (left: {left})" if left else ""))
    for link in Path("/sys/class/net").glob("rfkh*"):
        tag = link.name.removeprefix("rfkh")
        if tag.isdigit() and not _alive(int(tag)):
            subprocess.run(["ip", "link", "del", link.name], capture_output=True)
            done.append(f"deleted {link.name}")
    for work in Path("/tmp").glob("rf-kube-*-*"):
        tag = work.name.split("-")[2]
        if tag.isdigit() and not _alive(int(tag)):
            shutil.rmtree(work, ignore_errors=True)
            done.append(f"removed {work}")
    done += [f"could not remove: {p}" for p in release_made_dirs(str(os.getpid()))]
    return done


def _stop_pid(popen: subprocess.Popen, grace: float = 10) -> None:
    """SIGTERM the process group ``popen`` leads, wait ``grace`` seconds, then SIGKILL it."""
    if popen.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(popen.pid, signal.SIGTERM)
    try:
        popen.wait(grace)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(popen.pid, signal.SIGKILL)
        popen.wait(10)


def _ns_inode(pid: int, kind: str) -> int | None:
    try:
        return os.stat(f"/proc/{pid}/ns/{kind}").st_ino
    except OSError:
        return None


def _pids_in_mount_ns(inode: int) -> list[int]:
    """PIDs of the processes whose mount namespace is ``inode``."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and _ns_inode(int(entry), "mnt") == inode:
            found.append(int(entry))
    return found


def cgroup_processes(name: str) -> set[int]:
    """PIDs in the cgroup tree ``name`` of any hierarchy (every ``cgroup.procs`` below
    ``/sys/fs/cgroup/<hierarchy>/<name>``)."""
    pids: set[int] = set()
    for procs in Path("/sys/fs/cgroup").glob(f"*/{name.strip('/')}/**/cgroup.procs"):
        with contextlib.suppress(OSError):
            pids.update(int(x) for x in procs.read_text().split())
    return pids


def _kill_cgroup_processes(name: str, timeout: float = 15) -> list[int]:
    """SIGKILL every process in the cgroup tree ``name`` (thawing its freezer cgroups first: a
    frozen process does not die) until none is left or ``timeout`` s pass; returns the PIDs
    still there."""
    deadline = time.monotonic() + timeout
    while True:
        for state in Path("/sys/fs/cgroup/freezer").glob(f"{name.strip('/')}/**/freezer.state"):
            with contextlib.suppress(OSError):
                if state.read_text().strip() != "THAWED":
                    state.write_text("THAWED")
        pids = cgroup_processes(name)
        if not pids or time.monotonic() > deadline:
            return sorted(pids)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.1)


def _remove_cgroups(name: str) -> list[str]:
    """Remove ``/sys/fs/cgroup/<hierarchy>/<name>`` (deepest first) in every hierarchy;
    returns the directories that stayed."""
    left = []
    roots = [p for p in Path("/sys/fs/cgroup").iterdir() if p.is_dir() and not p.is_symlink()]
    for root in roots:
        top = root / name.strip("/")
        if not top.is_dir():
            continue
        for dirpath, _dirs, _files in sorted(os.walk(top), key=lambda t: -t[0].count("/")):
            for _ in range(50):
                try:
                    os.rmdir(dirpath)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.1)
        if top.exists():
            left.append(str(top))
    return left


def _free_veth_net() -> tuple[str, str]:
    """``(host address, namespace address)`` of the first /30 of :data:`VETH_RANGE` that no
    address on this machine is in (``ip -o addr``)."""
    used = subprocess.run(["ip", "-o", "-4", "addr"], capture_output=True, text=True).stdout
    taken = [ipaddress.ip_interface(m).network
             for m in re.findall(r"inet (\d+\.\d+\.\d+\.\d+/\d+)", used)]
    for net in ipaddress.ip_network(VETH_RANGE).subnets(new_prefix=30):
        if not any(net.overlaps(t) for t in taken):
            first, second = list(net.hosts())
            return str(first), str(second)
    raise ClusterError(f"no free /30 left in {VETH_RANGE}")


def _make_cgroups(name: str) -> None:
    """Create the kubelet's cgroup root ``name`` in every cgroup v1 hierarchy (the kubelet
    refuses a root that is missing in one); cpuset's gets its parent's CPUs and memory nodes,
    which a new cpuset cgroup starts without."""
    for root in Path("/sys/fs/cgroup").iterdir():
        if not root.is_dir() or root.is_symlink() or root.name == "unified":
            continue
        top = root / name.strip("/")
        top.mkdir(exist_ok=True)
        if root.name == "cpuset":
            for key in ("cpuset.cpus", "cpuset.mems"):
                (top / key).write_text((root / key).read_text())


def _pod_network(cni_dir: Path) -> None:
    """The CNI configuration: the bridge plugin on :data:`BRIDGE` (no gateway: the bridge holds
    the node IP, set up before), host-local addresses from :data:`POD_CIDR` with one route, to
    the Service range through the node (kube-proxy's DNAT there), and the loopback plugin."""
    cni_dir.mkdir(parents=True, exist_ok=True)
    config = {"cniVersion": "0.4.0", "name": "rf-pods", "plugins": [
        {"type": "bridge", "bridge": BRIDGE, "isGateway": False, "ipMasq": False,
         "hairpinMode": True,
         "ipam": {"type": "host-local", "ranges": [[{"subnet": POD_CIDR,
                                                     "rangeStart": "198.18.0.10",
                                                     "rangeEnd": "198.18.0.250"}]],
                  "routes": [{"dst": SERVICE_CIDR, "gw": NODE_IP}],
                  "dataDir": str(cni_dir / "ipam")}},
        {"type": "portmap", "capabilities": {"portMappings": True}}]}
    (cni_dir / "10-rf-pods.conflist").write_text(json.dumps(config, indent=2))


def _containerd_config(work: Path, cni_dir: Path, cgroup: str) -> Path:
    config = f"""version = 2
root = "{work / 'containerd' / 'root'}"
state = "{work / 'containerd' / 'state'}"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
                    "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper",
                    "io.containerd.internal.v1.tracing", "io.containerd.tracing.processor.v1.otlp"]
[grpc]
  address = "{work / 'containerd.sock'}"
[ttrpc]
  address = "{work / 'containerd.ttrpc.sock'}"
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "localhost/repeat-failure-test/pause:1"
  # This machine's root lacks CAP_SYS_RESOURCE: runc cannot lower oom_score_adj (K8S-NOTES).
  restrict_oom_score_adj = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "{cni_dir}"
    max_conf_num = 1
"""
    path = work / "containerd.toml"
    path.write_text(config)
    return path


def start(archives: Path, bin_dir: Path, *, timeout: float = 120) -> Cluster:
    """Start the cluster and wait until the node is Ready, the ``default`` service account
    exists in ``default`` and the images are imported. On any failure everything started so
    far is stopped and :class:`ClusterError` raised (naming the step, with the component's log
    tail)."""
    started = time.monotonic()
    tag = f"{os.getpid()}"
    work = Path(tempfile.mkdtemp(prefix=f"rf-kube-{tag}-", dir="/tmp"))
    work.chmod(0o755)
    cluster = Cluster(work=work, bin_dir=bin_dir, cgroup=f"/rf-kube-{tag}", tag=tag)
    try:
        _start(cluster, archives, timeout)
    except BaseException:
        problems = cluster.stop()
        if problems:
            raise ClusterError("start failed, and stopping left: " + "; ".join(problems))
        raise
    cluster.timings["start_s"] = time.monotonic() - started
    return cluster


def _run(argv: list[str], what: str) -> str:
    out = subprocess.run(argv, capture_output=True, text=True, timeout=120, umask=0o022)
    if out.returncode != 0:
        raise ClusterError(f"{what}: {' '.join(argv)}: {out.stderr.strip() or out.stdout}")
    return out.stdout


def _start(c: Cluster, archives: Path, timeout: float) -> None:
    work, b = c.work, c.bin_dir
    # The network namespace (held by a process of ours), its bridge (the node IP) and the veth
    # pair to this process.
    holder = c._spawn("netns", ["unshare", "--net", "--", "sleep", "infinity"])
    c.wait_for("the network namespace",
               lambda: _ns_inode(holder.popen.pid, "net") != _ns_inode(os.getpid(), "net")
               and Path(f"/proc/{holder.popen.pid}/comm").read_text().strip() == "sleep",
               10, holder, interval=0.02)
    c.netns_pid = holder.popen.pid
    ns = ["nsenter", f"--net=/proc/{c.netns_pid}/ns/net", "ip"]
    _run([*ns, "link", "set", "lo", "up"], "loopback")
    _run([*ns, "link", "add", BRIDGE, "type", "bridge"], "bridge")
    _run([*ns, "addr", "add", f"{NODE_IP}/24", "dev", BRIDGE], "bridge address")
    _run([*ns, "link", "set", BRIDGE, "up"], "bridge up")
    c.veth = f"rfkh{c.tag}"  # at most 11 characters (pid_max is 2^22); a name may have 15
    _run(["ip", "link", "add", c.veth, "type", "veth", "peer", "name", "rfkn", "netns",
          str(c.netns_pid)], "veth pair")
    c.host_ip, c.ns_ip = _free_veth_net()
    _run(["ip", "addr", "add", f"{c.host_ip}/30", "dev", c.veth], "veth address")
    _run(["ip", "link", "set", c.veth, "up"], "veth up")
    _run([*ns, "addr", "add", f"{c.ns_ip}/30", "dev", "rfkn"], "veth address (namespace)")
    _run([*ns, "link", "set", "rfkn", "up"], "veth up (namespace)")
    # Nothing is forwarded in the namespace (ip_forward stays 0 there); and should it ever be
    # turned on, nothing but the bridge's own traffic passes.
    _run(c.in_netns(["iptables", "-P", "FORWARD", "DROP"]), "FORWARD policy")

    pki = c.pki = Pki(work / "pki")
    api_cert, api_key = pki.issue(
        "apiserver", "kube-apiserver", server=True,
        dns=("kubernetes", "kubernetes.default", "kubernetes.default.svc",
             "kubernetes.default.svc.cluster.local", "localhost"),
        ips=(NODE_IP, c.ns_ip, SERVICE_IP, "127.0.0.1"))
    kubelet_client = pki.issue("apiserver-kubelet-client", "kube-apiserver-kubelet-client",
                               ("system:masters",))
    kubelet_cert, kubelet_key = pki.issue("kubelet-serving", f"system:node:{NODE_NAME}",
                                          ("system:nodes",), server=True, ips=(NODE_IP,),
                                          dns=(NODE_NAME,))
    c.kubeconfig = pki.kubeconfig("admin", "repeat-failure-test-admin", ("system:masters",),
                                  server=f"https://{c.ns_ip}:6443")
    cm_config = pki.kubeconfig("controller-manager", "system:kube-controller-manager")
    sched_config = pki.kubeconfig("scheduler", "system:kube-scheduler")
    kubelet_config = pki.kubeconfig("kubelet", f"system:node:{NODE_NAME}", ("system:nodes",))
    proxy_config = pki.kubeconfig("proxy", "system:kube-proxy", ("system:node-proxier",))
    # Prometheus's client certificate for kubernetes_sd_configs (configure_prometheus).
    pki.issue("prometheus", "repeat-failure-test-prometheus", ("system:masters",))
    ca = str(pki.root / "ca.crt")

    # etcd and the control plane, in the namespace (loopback and the bridge).
    net = c.in_netns([])
    t = time.monotonic()
    etcd = c._spawn("etcd", [*net, str(b / "etcd"), "--name", "rf", "--data-dir",
                             str(work / "etcd"), "--listen-client-urls", "http://127.0.0.1:2379",
                             "--advertise-client-urls", "http://127.0.0.1:2379",
                             "--listen-peer-urls", "http://127.0.0.1:2380",
                             "--initial-advertise-peer-urls", "http://127.0.0.1:2380",
                             "--initial-cluster", "rf=http://127.0.0.1:2380",
                             "--listen-metrics-urls", "", "--unsafe-no-fsync",
                             "--log-level", "warn"])
    apiserver = c._spawn("kube-apiserver", [
        *net, str(b / "kube-apiserver"), "--etcd-servers", "http://127.0.0.1:2379",
        "--bind-address", "0.0.0.0", "--secure-port", "6443", "--advertise-address", NODE_IP,
        "--service-cluster-ip-range", SERVICE_CIDR, "--client-ca-file", ca,
        "--tls-cert-file", str(api_cert), "--tls-private-key-file", str(api_key),
        "--kubelet-client-certificate", str(kubelet_client[0]),
        "--kubelet-client-key", str(kubelet_client[1]),
        "--kubelet-preferred-address-types", "InternalIP",
        "--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
        "--service-account-key-file", str(pki.root / "sa.pub"),
        "--service-account-signing-key-file", str(pki.root / "sa.key"),
        "--authorization-mode", "Node,RBAC", "--enable-aggregator-routing=true",
        "--enable-admission-plugins", "NodeRestriction", "--allow-privileged=true",
        "--profiling=false", "--v=1"])
    c.wait_for("etcd", lambda: etcd.popen.poll() is None, 5, etcd)
    c.wait_for("the apiserver's /readyz",
               lambda: c.kubectl("get", "--raw", "/readyz", check=False,
                                 timeout=10).returncode == 0, timeout, apiserver)
    c.timings["apiserver_ready_s"] = time.monotonic() - t
    controller = c._spawn("kube-controller-manager", [
        *net, str(b / "kube-controller-manager"), "--kubeconfig", str(cm_config),
        "--authentication-kubeconfig", str(cm_config), "--authorization-kubeconfig",
        str(cm_config), "--root-ca-file", ca,
        "--service-account-private-key-file", str(pki.root / "sa.key"),
        "--cluster-signing-cert-file", ca, "--cluster-signing-key-file",
        str(pki.root / "ca.key"), "--use-service-account-credentials=true",
        "--leader-elect=false", "--allocate-node-cidrs=false", "--bind-address", "127.0.0.1",
        "--service-cluster-ip-range", SERVICE_CIDR, "--profiling=false", "--v=1"])
    c._spawn("kube-scheduler", [
        *net, str(b / "kube-scheduler"), "--kubeconfig", str(sched_config),
        "--authentication-kubeconfig", str(sched_config), "--authorization-kubeconfig",
        str(sched_config), "--leader-elect=false", "--bind-address", "127.0.0.1",
        "--profiling=false", "--v=1"])

    # containerd in a mount namespace of its own (the node's), with stand-ins over the /proc/sys
    # files the kubelet writes; the kubelet and kube-proxy join it below.
    cni_dir = work / "cni"
    _pod_network(cni_dir)
    sysctl_dir = work / "sysctl"
    sysctl_dir.mkdir()
    binds = []
    for key in KUBELET_SYSCTLS:
        stand_in = sysctl_dir / key.replace("/", ".")
        stand_in.write_text(Path("/proc/sys", key).read_text())
        binds.append(f"mount --bind {stand_in} /proc/sys/{key}")
    kubelet_root = work / "kubelet"
    kubelet_root.mkdir()
    private = []
    # /var/lib/kubelet: the kubelet's device-plugin socket is there whatever its --root-dir
    # (k8s.io/kubelet's pluginapi.DevicePluginPath, a constant).
    for path in (Path("/run"), Path("/var/log"), Path("/var/lib/cni"), Path("/var/lib/kubelet")):
        if not path.exists():
            path.mkdir(parents=True)
            c.made_dirs.append(path)
        if path in c.made_dirs or _made_mark(path).exists():
            MADE_DIRS.mkdir(exist_ok=True)
            _made_mark(path).write_text(str(path))
        private.append(f"mount -t tmpfs -o mode=0755 rf-node {path}")
    script = " && ".join([
        *binds, *private,
        # The kubelet's pod directory: a shared mount, so the volumes it mounts there (service
        # account tokens) are seen in the containers runc starts.
        f"mount --bind {kubelet_root} {kubelet_root}", f"mount --make-rshared {kubelet_root}",
        f"exec {shutil.which('containerd')} --config {_containerd_config(work, cni_dir, c.cgroup)}"
        " --log-level warn"])
    containerd = c._spawn("containerd", ["unshare", "--mount", "--propagation", "slave",
                                         *net, "sh", "-c", script])
    c.wait_for("containerd's socket", lambda: (work / "containerd.sock").exists(), 30,
               containerd)
    c.containerd_pid = _child_named(containerd.popen.pid, "containerd")
    node = ["nsenter", "-t", str(c.containerd_pid), "--mount", "--net", "--"]
    for name in ("pause", "base", "image"):
        t = time.monotonic()
        _run([*node, "ctr", "--address", str(work / "containerd.sock"), "-n", "k8s.io",
              "images", "import", str(archives / f"{name}.tar")],
             f"import {name}")
        c.timings[f"import_{name}_s"] = time.monotonic() - t

    kubelet_cfg = {
        "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
        "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": True},
                           "x509": {"clientCAFile": ca}},
        "authorization": {"mode": "Webhook"},
        "tlsCertFile": str(kubelet_cert), "tlsPrivateKeyFile": str(kubelet_key),
        "address": NODE_IP, "port": 10250, "readOnlyPort": 0, "healthzPort": 0,
        "cgroupDriver": "cgroupfs", "cgroupRoot": c.cgroup, "cgroupsPerQOS": True,
        "failCgroupV1": False, "failSwapOn": False, "resolvConf": "",
        "containerRuntimeEndpoint": f"unix://{work / 'containerd.sock'}",
        "imageGCHighThresholdPercent": 100, "imageGCLowThresholdPercent": 99,
        "evictionHard": {"memory.available": "100Mi", "nodefs.available": "1%",
                         "imagefs.available": "1%", "nodefs.inodesFree": "1%"},
        "protectKernelDefaults": False, "serializeImagePulls": False,
        "registerNode": True, "maxPods": 30, "enableServer": True,
        "localStorageCapacityIsolation": True, "shutdownGracePeriod": "0s",
        # Mounted ConfigMaps follow their object within ~10 s instead of ~1 min (the default),
        # so turning the check off reaches the injector within a test's patience.
        "syncFrequency": "10s",
        "enableControllerAttachDetach": True,
    }
    kubelet_yaml = work / "kubelet.yaml"
    kubelet_yaml.write_text(yaml.safe_dump(kubelet_cfg))
    _make_cgroups(c.cgroup)
    t = time.monotonic()
    kubelet = c._spawn("kubelet", [*node, str(b / "kubelet"), "--config", str(kubelet_yaml),
                                   "--kubeconfig", str(kubelet_config), "--root-dir",
                                   str(kubelet_root), "--hostname-override", NODE_NAME,
                                   "--node-ip", NODE_IP, "--v=1"])
    proxy_cfg = {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1", "kind": "KubeProxyConfiguration",
        "mode": "iptables", "clientConnection": {"kubeconfig": str(proxy_config)},
        "hostnameOverride": NODE_NAME, "clusterCIDR": POD_CIDR,
        "bindAddress": NODE_IP, "healthzBindAddress": "127.0.0.1:10256",
        "metricsBindAddress": "127.0.0.1:10249",
        "conntrack": {"maxPerCore": 0, "min": 0, "tcpEstablishedTimeout": "0s",
                      "tcpCloseWaitTimeout": "0s"},
        "iptables": {"localhostNodePorts": False, "masqueradeAll": False},
        "nodePortAddresses": [f"{NODE_IP}/32"],
    }
    proxy_yaml = work / "kube-proxy.yaml"
    proxy_yaml.write_text(yaml.safe_dump(proxy_cfg))
    c._spawn("kube-proxy", [*node, str(b / "kube-proxy"), "--config", str(proxy_yaml),
                            "--v=1"])

    def node_ready() -> bool:
        got = json.loads(c.kubectl("get", "node", NODE_NAME, "-o", "json", check=False,
                                   timeout=10).stdout or "{}")
        conditions = got.get("status", {}).get("conditions", [])
        return any(x["type"] == "Ready" and x["status"] == "True" for x in conditions)
    c.wait_for("the node to be Ready", node_ready, timeout, kubelet, interval=0.5)
    c.timings["node_ready_s"] = time.monotonic() - t
    c.wait_for("the default service account",
               lambda: c.kubectl("get", "serviceaccount", "default", check=False,
                                 timeout=10).returncode == 0, timeout, controller)

    # A real Prometheus in the namespace (it scrapes pod IPs on the bridge), configured later
    # by the tests (configure_prometheus) and reloaded through its API.
    prom_dir = work / "prometheus"
    (prom_dir / "rules").mkdir(parents=True)
    (prom_dir / "prometheus.yml").write_text(yaml.safe_dump({"global": {}}))
    prom = c._spawn("prometheus", [
        *net, str(b / "prometheus"),
        "--config.file", str(prom_dir / "prometheus.yml"),
        "--storage.tsdb.path", str(prom_dir / "data"),
        "--web.listen-address", f"0.0.0.0:{PROMETHEUS_PORT}", "--web.enable-lifecycle",
        "--log.level", "warn"])
    c.wait_for("Prometheus to be ready",
               lambda: urllib.request.urlopen(f"http://{c.ns_ip}:{PROMETHEUS_PORT}/-/ready",
                                              timeout=2).status == 200, 60, prom)


def configure_prometheus(c: Cluster, scrape_configs: list[dict], rule_groups: list[dict]) -> None:
    """Write Prometheus's configuration (``scrape_configs``, evaluation every 2 s) and one rule
    file with ``rule_groups``, then reload it (``POST /-/reload``). Each scrape config gets the
    apiserver's address and the client certificate for ``kubernetes_sd_configs`` filled in
    where it has an empty ``kubernetes_sd_configs`` entry's ``api_server``."""
    prom_dir = c.work / "prometheus"
    pki = c.pki
    assert pki is not None
    creds = {"ca_file": str(pki.root / "ca.crt"),
             "cert_file": str(pki.root / "prometheus.crt"),
             "key_file": str(pki.root / "prometheus.key")}
    for config in scrape_configs:
        for sd in config.get("kubernetes_sd_configs", []):
            sd.setdefault("api_server", f"https://{NODE_IP}:6443")
            sd.setdefault("tls_config", creds)
    (prom_dir / "rules" / "rules.yml").write_text(yaml.safe_dump({"groups": rule_groups}))
    (prom_dir / "prometheus.yml").write_text(yaml.safe_dump({
        "global": {"scrape_interval": "2s", "evaluation_interval": "2s"},
        "rule_files": [str(prom_dir / "rules" / "*.yml")],
        "scrape_configs": scrape_configs}))
    req = urllib.request.Request(f"http://{c.ns_ip}:{PROMETHEUS_PORT}/-/reload",
                                 method="POST")
    with urllib.request.urlopen(req, timeout=30) as response:
        assert response.status == 200


def _child_named(pid: int, name: str, timeout: float = 10) -> int:
    """The PID of ``name``: ``pid`` itself once it has exec'd ``name``, or its descendant of
    that name (``unshare`` → ``nsenter`` → ``sh`` → ``exec containerd``)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        todo = [pid]
        while todo:
            current = todo.pop()
            try:
                comm = Path(f"/proc/{current}/comm").read_text().strip()
            except OSError:
                continue
            if comm == name:
                return current
            with contextlib.suppress(OSError):
                for task in os.listdir(f"/proc/{current}/task"):
                    children = Path(f"/proc/{current}/task/{task}/children").read_text()
                    todo += [int(x) for x in children.split()]
        time.sleep(0.05)
    raise ClusterError(f"no process named {name} under {pid}")
