"""Which Ray a sweep runs on, and noticing when its head goes away (used by ``pipelines.sweep``).

``ray.address``:

- ``local`` (default): always start a private Ray for this driver with ``ray.num_cpus`` workers,
  whatever else runs on the host (a ``ray start`` head, a stale address file, ``RAY_ADDRESS``);
  it stops with the driver.
- ``auto``: join the cluster ``RAY_ADDRESS`` names, else the one ``ray start`` recorded on this host
  (its address file; a stale one is reported, not waited on).
- ``host:port``: join the head whose GCS listens there.

Joining never passes ``num_cpus`` (Ray refuses it: the cluster's own CPUs count). A cluster with
token authentication needs ``RAY_AUTH_TOKEN`` (or ``RAY_AUTH_TOKEN_PATH``) in the driver's
environment (or ``~/.ray/auth_token``); ``RAY_AUTH_MODE=token`` is implied when there is one. A missing or wrong token,
an address nobody answers on, or no cluster to join is one line (exit 2), before anything is
logged. Ray's driver exits by itself about 60 s after it loses its GCS, so the sweep watches the
head's port (:class:`HeadWatch`) and stops first, with its summary.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import tempfile
import threading
import time
from dataclasses import dataclass

from collectives.errors import SpecError

LOCAL, AUTO = "local", "auto"
DOCS = "docs/sweeps.md (Ray)"
# Ray retries a GCS connection once a second for 20 s by default; a join fails sooner than that
CONNECT_RETRIES_S = "5"


@dataclass(frozen=True, slots=True, kw_only=True)
class Target:
    mode: str  # local | auto | join
    address: str | None = None  # host:port for join

    @property
    def joins(self) -> bool:
        return self.mode != LOCAL


def target_of(address) -> Target:
    """Parse ``ray.address`` (None and "" mean local)."""
    if address in (None, "", LOCAL):
        return Target(mode=LOCAL)
    text = str(address).strip()
    if text == AUTO:
        return Target(mode=AUTO)
    if "://" in text:
        raise SpecError(f"ray.address={text!r}: Ray client addresses are not supported; give the head's GCS "
                        f"address host:port (ray start --head prints it), auto or local")
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise SpecError(f"ray.address={text!r} must be local (a private Ray, the default), auto (the cluster "
                        f"RAY_ADDRESS or `ray start` names) or host:port of a head's GCS, e.g. 10.0.0.1:6379")
    return Target(mode="join", address=text)


def reachable(address: str, timeout_s: float = 2.0) -> str | None:
    """None when something accepts TCP connections at host:port, else why not."""
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
            return None
    except OSError as exc:
        return exc.strerror or type(exc).__name__


@contextlib.contextmanager
def _captured_fd2():
    """Ray's C++ core logs connection retries straight to file descriptor 2; keep them so a
    failure can be told apart (authentication or not) and reported in one line."""
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as buf:
        os.dup2(buf.fileno(), 2)
        text: list[str] = []
        try:
            yield text
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            buf.seek(0)
            text.append(buf.read().decode(errors="replace"))


def _token_auth_if_token() -> None:
    """Use token authentication when the driver has a token (RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or
    ~/.ray/auth_token) and RAY_AUTH_MODE is unset, as Ray does for a cluster it finds by itself but
    not for an explicit address. A cluster without authentication accepts such a client too."""
    if os.environ.get("RAY_AUTH_MODE") is not None:
        return
    try:
        from ray._private.authentication.authentication_token_setup import (
            maybe_enable_token_auth_if_token_available)
    except ImportError:  # a Ray without token authentication
        return
    maybe_enable_token_auth_if_token_available(warn_if_disabled=False)


def join_error(target: Target, exc: BaseException, log: str) -> str:
    """One line for a failed join, naming the fix."""
    where = f"ray.address={target.address or AUTO}"
    text = f"{type(exc).__name__} {exc} {log}"
    if "Authentication" in text or "Unauthenticated" in text or "InvalidAuthToken" in text:
        have = "a token that the cluster refuses" if os.environ.get("RAY_AUTH_TOKEN") or \
            os.environ.get("RAY_AUTH_TOKEN_PATH") else "no token"
        return (f"{where}: the Ray cluster uses token authentication and the driver has {have}; export "
                f"RAY_AUTH_TOKEN=<the cluster's token> (or RAY_AUTH_TOKEN_PATH=<file>) before the sweep "
                f"(see {DOCS})")
    if "Could not find any running Ray instance" in text:
        return (f"{where}: no Ray cluster to join (RAY_ADDRESS is unset and no `ray start` head runs on this "
                f"host); start one with `ray start --head`, or use ray.address=local for a private Ray")
    return f"{where}: could not join the Ray cluster: {' '.join(str(exc).split())[:300]}"


def _init_kwargs(ray_cfg: dict) -> dict:
    return dict(include_dashboard=False, logging_level="ERROR", log_to_driver=bool(ray_cfg.get("log_to_driver", False)))


# Ray builds a process's serialization context on its first (de)serialization and there registers
# serializers for pyarrow tables, pydantic model fields and starlette state
# (``ray.util.serialization_addons.apply``), importing all three when installed (MLflow installs
# them): 0.13 s before a driver's first task goes out (measured: the first ``.remote()`` 0.134 s,
# 0.003 s without them) and again in every worker before its first point, 0.16-0.19 CPU s and
# ~4,800 page faults a process. A sweep sends lists of plain configs and gets plain dicts back;
# none of those types ever crosses.
def lean_serialization() -> None:
    """Register none of Ray's optional serialization add-ons in this process; takes effect when
    the process's serialization context is built (its first task, or its first argument received)."""
    try:
        from ray.util import serialization_addons
    except ImportError:
        return
    if hasattr(serialization_addons, "apply"):
        serialization_addons.apply = _no_addons


def _no_addons(serialization_context) -> None:
    return None


def lean_serialization_in_worker() -> None:
    """:func:`lean_serialization` when this process is a Ray worker. Called when the module of the
    sweep's task is imported: a worker imports it to load the task, before it decodes the task's
    arguments, the first use of its serialization context (nothing earlier can reach the worker
    without a runtime environment, which would stop Ray from starting workers ahead of the tasks)."""
    ray = sys.modules.get("ray")  # not imported: not a Ray worker
    try:
        in_worker = ray is not None and ray._private.worker.global_worker.mode == ray.WORKER_MODE
    except AttributeError:  # another Ray layout: leave its serialization as it is
        return
    if in_worker:
        lean_serialization()


# Ray starts its workers at niceness 15 (its raylet's ``worker_niceness``), below every other
# process of the host: on a 2-core host the driver's bookkeeping, Ray's own agents starting up and
# anything else then run ahead of the points, and the sweep's tracking process (niceness 19;
# pipelines/tracking_process.py) would hardly be behind them. A private Ray's workers do the
# sweep's work: they run at the driver's priority. Set RAY_worker_niceness to keep Ray's default.
PRIVATE_WORKER_NICENESS = "0"


def _start_private(ray_cfg: dict) -> None:
    import ray

    os.environ.setdefault("RAY_worker_niceness", PRIVATE_WORKER_NICENESS)  # read by the raylet it starts
    with lean_head(log_to_driver=bool(ray_cfg.get("log_to_driver", False))):
        ray.init(address=LOCAL, num_cpus=int(ray_cfg.get("num_cpus") or os.cpu_count() or 1), **_init_kwargs(ray_cfg))


@contextlib.contextmanager
def lean_head(*, log_to_driver: bool):
    """While a private head starts, leave out the head processes a one-driver local cluster does
    not use: the autoscaler monitor (a fixed cluster has nothing to scale), the API server
    (dashboard, job and state APIs; ``ray.init`` waits until it has registered) and, when worker
    output is not streamed to the driver, the log monitor. Each is a Python process importing
    Ray: of the ≈ 4.1 CPU s a head took to start on 2 cores they were 1.3 s, and the API server
    ≈ 0.7 s of the wait before the first task (measured). ``ray.init`` has no switch for them;
    the head node's ``RayParams`` has two (``no_monitor``, ``include_log_monitor``) and the API
    server is one method of ``Node``. The head's wait for its raylet to register polls every
    20 ms instead of every second (:func:`wait_until_registered`). Another Ray layout gets a full
    head."""
    try:
        from ray._private import node as ray_node
        from ray._private import services as ray_services
    except ImportError:
        ray_node = ray_services = None
    if ray_node is None or not hasattr(ray_node.Node, "start_api_server") or not hasattr(ray_services, "get_node"):
        yield
        return
    original_init, original_api = ray_node.Node.__init__, ray_node.Node.start_api_server
    original_get_node = ray_services.get_node

    def init(self, ray_params, *args, **kwargs):
        if kwargs.get("head", args[0] if args else False):
            ray_params.no_monitor = True
            if not log_to_driver:
                ray_params.include_log_monitor = False
        original_init(self, ray_params, *args, **kwargs)

    def get_node(gcs_address, node_id):
        wait_until_registered(gcs_address, node_id)
        return original_get_node(gcs_address, node_id)

    ray_node.Node.__init__ = init
    ray_node.Node.start_api_server = lambda self, **kwargs: None
    ray_services.get_node = get_node
    try:
        yield
    finally:
        ray_node.Node.__init__, ray_node.Node.start_api_server = original_init, original_api
        ray_services.get_node = original_get_node


# Ray's head waits for its raylet to register through ``services.get_node``, whose C++ loop
# (GlobalStateAccessor::GetNode) asks the GCS once and then sleeps a whole second between tries;
# the raylet registers ~0.5 s after it starts, so a private head waited ~1 s where ~0.5 s would do
# (measured: ray.init 1.77-1.88 s, 1.17-1.50 s with the poll below). One GCS query per poll.
REGISTER_POLL_S = 0.02
REGISTER_WAIT_S = 10.0  # then Ray's own wait (30 s) and error take over


def wait_until_registered(gcs_address: str, node_id: str, timeout_s: float = REGISTER_WAIT_S,
                          poll_s: float = REGISTER_POLL_S) -> bool:
    """Whether the node ``node_id`` (hex) is listed alive in the GCS within ``timeout_s``, asking
    every ``poll_s``; False also when the GCS cannot be asked (Ray's own call then reports it)."""
    try:
        import ray
        from ray._private import services as ray_services

        state = ray._private.state.GlobalState()
        state._initialize_global_state(ray_services._get_gcs_client_options(gcs_address))
    except Exception:  # noqa: BLE001 - another Ray layout: its own wait applies
        return False
    end = time.monotonic() + timeout_s
    try:
        while True:
            with contextlib.suppress(Exception):
                if any(row.get("NodeID") == node_id and row.get("Alive") for row in state.node_table()):
                    return True
            if time.monotonic() >= end:
                return False
            time.sleep(poll_s)
    finally:
        with contextlib.suppress(Exception):
            state.disconnect()


class EarlyStart:
    """A private Ray started on a thread while the driver still composes and checks the sweep's
    points (a private ``ray.init`` takes ≈ 4 s on 2 cores, composing the figure-4 sweep ≈ 1 s).
    The thread then waits, alive, until the process ends: Ray starts its head processes with a
    parent-death signal, and a thread's exit counts as the parent's death (they would die with it)."""

    def __init__(self, ray_cfg: dict) -> None:
        self.key = _early_key(ray_cfg)
        self.ready, self.error = threading.Event(), None
        threading.Thread(target=self._run, args=(dict(ray_cfg),), name="gx-ray-start", daemon=True).start()

    def _run(self, ray_cfg: dict) -> None:
        try:
            _start_private(ray_cfg)
        except BaseException as exc:  # noqa: BLE001 - re-raised by connect() in the driver's thread
            self.error = exc
        self.ready.set()
        threading.Event().wait()  # keep Ray's head processes' parent alive

    def wait(self) -> None:
        self.ready.wait()
        if self.error is not None:
            raise self.error


_EARLY: list[EarlyStart] = []


def _early_key(ray_cfg: dict) -> tuple:
    return (ray_cfg.get("num_cpus"), bool(ray_cfg.get("log_to_driver", False)))


def start_early(ray_cfg: dict) -> None:
    """Begin starting the private Ray of ``ray.address=local`` now (see :class:`EarlyStart`); a
    later :func:`connect` with the same settings waits for it instead of starting its own."""
    ray = sys.modules.get("ray")  # not imported yet: not initialized either (the thread imports it)
    if _EARLY or not ray_cfg.get("enabled", True) or (ray is not None and ray.is_initialized()):
        return
    try:
        if target_of(ray_cfg.get("address")).joins:
            return
    except SpecError:  # reported by the sweep, in its place
        return
    _EARLY.append(EarlyStart(ray_cfg))


def connect(ray_cfg: dict) -> tuple[Target, int]:
    """Start or join Ray; returns the target and the number of CPU workers. SpecError on failure."""
    import ray

    target = target_of(ray_cfg.get("address"))
    if _EARLY and not target.joins and _EARLY[0].key == _early_key(ray_cfg):
        _EARLY.pop().wait()
    if ray.is_initialized():
        return target, int(ray.cluster_resources().get("CPU", 1))
    kwargs = _init_kwargs(ray_cfg)
    if not target.joins:
        _start_private(ray_cfg)
        return target, int(ray.cluster_resources().get("CPU", 1))
    address = target.address or auto_address()
    why = reachable(address)
    if why is not None:
        source = "RAY_ADDRESS" if os.environ.get("RAY_ADDRESS") else "the address file of `ray start`"
        where = target.address or f"auto ({address}, from {source})"
        raise SpecError(f"ray.address={where}: no Ray head answers there ({why}); start one with "
                        f"`ray start --head --port={address.rpartition(':')[2]}` or use "
                        f"ray.address=local for a private Ray")
    os.environ.setdefault("RAY_gcs_server_port_wait_time_s", CONNECT_RETRIES_S)
    try:
        with _captured_fd2() as log:
            _token_auth_if_token()
            ray.init(address=address, **kwargs)
    except Exception as exc:
        with contextlib.suppress(Exception):
            ray.shutdown()
        raise SpecError(join_error(target, exc, "".join(log))) from None
    return target, int(ray.cluster_resources().get("CPU", 1))


def stop_before_exit() -> None:
    """Stop this driver's Ray just before the process leaves (``os._exit``). A private Ray: only
    its raylet is stopped (gracefully: it ends its workers and agents, ≈ 30 ms); the other head
    processes (GCS, monitor, dashboard, log monitor) carry a parent-death signal and end with the
    driver. ``ray.shutdown()`` would stop them one by one and wait a second for the autoscaler
    monitor, which does not answer SIGTERM. A joined cluster: disconnect (``ray.shutdown``)."""
    with contextlib.suppress(Exception):
        import ray

        if not ray.is_initialized():
            return
        from ray._private import ray_constants
        from ray._private.worker import _global_node as node

        raylet = ray_constants.PROCESS_TYPE_RAYLET
        if node is not None and raylet in getattr(node, "all_processes", {}):
            node._kill_process_type(raylet, check_alive=False, allow_graceful=True, wait=True)
            return
        ray.shutdown()


def auto_address() -> str:
    """``ray.address=auto``: RAY_ADDRESS, else the address file of the last ``ray start`` on this
    host (never, as Ray's own "auto" would, any Ray process it finds running: on a shared host
    that may be another user's private Ray)."""
    address = os.environ.get("RAY_ADDRESS", "").strip()
    if not address:
        try:
            from ray._private.utils import read_ray_address

            address = read_ray_address() or ""
        except ImportError:
            address = ""
    if not address:
        raise SpecError("ray.address=auto: no Ray cluster to join (RAY_ADDRESS is unset and no `ray start` head "
                        "runs on this host); start one with `ray start --head`, or use ray.address=local for a "
                        "private Ray")
    try:
        found = target_of(address)
    except SpecError as exc:
        raise SpecError(f"ray.address=auto found {address!r}, which is no head's address host:port ({exc})") from None
    return found.address or address


def gcs_address() -> str | None:
    import ray

    try:
        return ray.get_runtime_context().gcs_address
    except Exception:
        return None


class HeadWatch:
    """Notices a lost Ray head: its GCS port refuses connections for ``grace_s`` in a row.
    Checked at most every ``every_s`` from the sweep's wait loop (a TCP connect, no Ray call,
    which would block while Ray itself retries)."""

    def __init__(self, address: str | None, every_s: float = 1.0, grace_s: float = 3.0):
        self.address, self.every_s, self.grace_s = address, every_s, grace_s
        self.checked_at = time.monotonic()
        self.down_since: float | None = None

    def lost(self) -> str | None:
        """None while the head answers; else what was lost, for the summary."""
        if self.address is None:
            return None
        now = time.monotonic()
        if now - self.checked_at < self.every_s:
            return None
        self.checked_at = now
        why = reachable(self.address, timeout_s=1.0)
        if why is None:
            self.down_since = None
            return None
        self.down_since = self.down_since or now
        if now - self.down_since >= self.grace_s:
            return f"Ray head at {self.address} lost ({why})"
        return None

    def lost_with_worker(self, within_s: float = 2.0) -> str | None:
        """After a worker died: was it the head going? (A killed head takes its workers first; its
        port then refuses within moments.) Probes for up to ``within_s``."""
        if self.address is None:
            return None
        deadline = time.monotonic() + within_s
        while True:
            why = reachable(self.address, timeout_s=0.5)
            if why is not None:
                return f"Ray head at {self.address} lost ({why})"
            if time.monotonic() >= deadline:
                return None
            time.sleep(0.25)
