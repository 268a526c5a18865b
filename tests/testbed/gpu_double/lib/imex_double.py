# -*- coding: utf-8 -*-
# Copyright (c) 2025 gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""nvidia-imex and nvidia-imex-ctl of the GPU double (tests/testbed/REALITY.md, "IMEX"; gpu_double/REALITY.md).

The nodes of the simulated fleet are separate network namespaces, so the domain is what the daemons see of each
other over TCP, as NVIDIA's are:

* ``nvidia-imex -c <config>`` reads the config (``KEY=value``), refuses a driver that is not loaded or of another
  version, reads the node list ``IMEX_NODE_CONFIG_FILE`` once, at start, finds its own entry (``BIND_INTERFACE_IP``,
  else the first address of the list that is this node's), listens on that address at ``SERVER_PORT`` (the peer
  port, 50000) and, with ``IMEX_CMD_ENABLED=1``, on ``IMEX_CMD_BIND_INTERFACE_IP`` (empty: every interface) at
  ``IMEX_CMD_PORT`` (the command service, 50005).  Every 2 s it connects to each peer's peer port and exchanges its
  node list and version: CONNECTED when they agree, NODE_MAP_MISMATCH or VERSION_MISMATCH when not, NEVER_CONNECTED
  while a peer never answered, RECOVERING once an established connection is lost (the default
  ``IMEX_NODE_DISCONNECTED_GRACE_TIME=-1`` never cleans up) or DISCONNECTED after a grace time that passed.  Without a
  readable node list it logs ``Failed to read node configuration file <path>`` and waits, serving nothing.
* ``nvidia-imex-ctl [-c <config>] -N [-j] [-H]`` reads the same config and node list and asks every node's command
  service for its state and connections: a node that does not answer is UNAVAILABLE with INVALID connections (the
  legend: "Node wasn't reachable, no connection status available").  The domain is UP when every node is READY and
  connected to every other, DOWN when none is READY, DEGRADED otherwise.  ``-q`` asks the local daemon only and
  prints its state (``READY``).  ``-j`` prints JSON in the shape of NVIDIA's specification sample (NVIDIA/DCGM
  DcgmImexManagerTests.cpp); without it the text form of public captures (legend, node lines, the connectivity
  matrix, ``Domain State: UP``).
* the fault ``imex-peer-down`` (``/var/lib/testbed/faults/imex-peer-down`` on a node): that node's daemon stops
  answering and connecting (its sockets closed, the process still running: a hung or partitioned daemon); removing
  the flag brings it back.

What is not imitated: authentication (TLS/GSSAPI), the daemon's own retry back-off (NVIDIA's retries at 15, 31,
62, 125 s: a healed domain is UP here within seconds), imports and exports, statistics.  The JSON names of the
connection states other than CONNECTED and INVALID are a guess from the text legend.
"""

from __future__ import absolute_import, division, print_function

import json
import os
import signal
import socket
import sys
import threading
import time

import gpudouble as gd

CONFIG = '/etc/nvidia-imex/config.cfg'
NODES_CONFIG = '/etc/nvidia-imex/nodes_config.cfg'
SERVER_PORT = 50000
CMD_PORT = 50005
PROBE_INTERVAL = 2.0
CONNECT_TIMEOUT = 1.0
FAULT_PEER_DOWN = 'imex-peer-down'
NOT_CONFIGURED = 'Failed to read node configuration file'
LEGEND = """Connectivity Table Legend:
I - Invalid - Node wasn't reachable, no connection status available
N - Never Connected
R - Recovering - Connection was lost, but clean up has not yet been triggered.
D - Disconnected - Connection was lost, and clean up has been triggreed.
A - Authenticating - If GSSAPI enabled, client has initiated mutual authentication.
!V! - Version mismatch, communication disabled.
!M! - Node map mismatch, communication disabled.
C - Connected - Ready for operation
"""
LETTERS = {'INVALID': 'I', 'NEVER_CONNECTED': 'N', 'RECOVERING': 'R', 'DISCONNECTED': 'D', 'AUTHENTICATING': 'A',
           'VERSION_MISMATCH': '!V!', 'NODE_MAP_MISMATCH': '!M!', 'CONNECTED': 'C'}


def log(text):
    stamp = time.strftime('%b %d %Y %H:%M:%S')
    sys.stdout.write('[{0}] [INFO] [tid {1}] {2}\n'.format(stamp, os.getpid(), text))
    sys.stdout.flush()


def read_config(path):
    values = {}
    with open(path) as handle:
        for line in handle:
            line = line.strip()
            if line and not line.startswith('#') and '=' in line:
                key, _sep, value = line.partition('=')
                values[key.strip()] = value.strip()
    return values


def _port(values, key, default):
    try:
        return int(values.get(key) or default)
    except ValueError:
        return default


def read_nodes(path):
    """The node list, or None when it cannot be read."""
    try:
        with open(path) as handle:
            return [line.strip() for line in handle if line.strip() and not line.strip().startswith('#')]
    except (IOError, OSError):
        return None


def is_local(address):
    """Whether ``address`` is one of this node's (it can be bound)."""
    family = socket.AF_INET6 if ':' in address else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.bind((address, 0))
        return True
    except (OSError, socket.error):
        return False
    finally:
        sock.close()


def _listen(address, port):
    family = socket.AF_INET6 if ':' in address else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((address, port))
    sock.listen(64)
    return sock


def _ask(address, port, line, timeout=CONNECT_TIMEOUT):
    """Send one line, read one JSON line back; None when the peer does not answer."""
    try:
        sock = socket.create_connection((address, port), timeout=timeout)
    except (OSError, socket.error):
        return None
    try:
        sock.settimeout(timeout)
        sock.sendall((line + '\n').encode('utf-8'))
        data = b''
        while not data.endswith(b'\n'):
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
        return json.loads(data.decode('utf-8')) if data.strip() else None
    except (OSError, socket.error, ValueError):
        return None
    finally:
        sock.close()


class Daemon(object):
    """One nvidia-imex: its node list, its listeners, its view of the connections."""

    def __init__(self, config, nodes, version):
        self.config = config
        self.nodes = nodes
        self.version = version
        self.server_port = _port(config, 'SERVER_PORT', SERVER_PORT)
        self.cmd_enabled = (config.get('IMEX_CMD_ENABLED') or '0').strip() == '1'
        self.cmd_port = _port(config, 'IMEX_CMD_PORT', CMD_PORT)
        self.cmd_bind = config.get('IMEX_CMD_BIND_INTERFACE_IP') or '0.0.0.0'  # nosec B104 - NVIDIA's default
        grace = config.get('IMEX_NODE_DISCONNECTED_GRACE_TIME') or '-1'
        self.grace = int(grace) if grace.lstrip('-').isdigit() else -1
        bind = config.get('BIND_INTERFACE_IP') or ''
        self.address = bind if bind else next((a for a in nodes if is_local(a)), None)
        self.index = nodes.index(self.address) if self.address in nodes else None
        self.hostname = socket.gethostname()
        self.status = 'INITIALIZING'
        self.links = {}            # index -> {'status', 'ever', 'lost_at'}
        self.lock = threading.Lock()
        self.sockets = []
        self.serving = False

    def start_serving(self):
        self.sockets = [_listen(self.address, self.server_port)]
        if self.cmd_enabled:
            self.sockets.append(_listen(self.cmd_bind, self.cmd_port))
        for sock in self.sockets:
            thread = threading.Thread(target=self._accept, args=(sock,))
            thread.daemon = True
            thread.start()
        self.serving = True
        self.status = 'READY'

    def stop_serving(self):
        for sock in self.sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except (OSError, socket.error):
                pass
            sock.close()
        self.sockets = []
        self.serving = False

    def _accept(self, sock):
        while True:
            try:
                conn, _peer = sock.accept()
            except (OSError, socket.error):
                return
            thread = threading.Thread(target=self._serve, args=(conn,))
            thread.daemon = True
            thread.start()

    def _serve(self, conn):
        try:
            conn.settimeout(CONNECT_TIMEOUT)
            data = b''
            while not data.endswith(b'\n'):
                chunk = conn.recv(65536)
                if not chunk:
                    break
                data += chunk
            request = data.decode('utf-8').strip()
            if request.startswith('{'):
                reply = {'nodes': self.nodes, 'version': self.version}
            elif request == 'STATUS':
                reply = self.view()
            elif request == 'QUERY':
                reply = {'status': self.status}
            else:
                reply = {'error': 'unknown request'}
            conn.sendall((json.dumps(reply) + '\n').encode('utf-8'))
        except (OSError, socket.error):
            pass
        finally:
            conn.close()

    def view(self):
        with self.lock:
            conns = {}
            for j, host in enumerate(self.nodes):
                status = 'CONNECTED' if j == self.index else (self.links.get(j) or {}).get('status', 'NEVER_CONNECTED')
                conns[str(j)] = {'host': host, 'status': status, 'changed': status == 'CONNECTED'}
        return {'status': self.status, 'host': self.address, 'connections': conns, 'changed': True,
                'version': self.version, 'hostName': self.hostname, 'nodes': self.nodes}

    def probe(self):
        hello = json.dumps({'nodes': self.nodes, 'version': self.version, 'from': self.address})
        for j, host in enumerate(self.nodes):
            if j == self.index:
                continue
            answer = _ask(host, self.server_port, hello)
            with self.lock:
                link = self.links.setdefault(j, {'status': 'NEVER_CONNECTED', 'ever': False, 'lost_at': None})
                if answer is None:
                    if link['ever']:
                        if link['lost_at'] is None:
                            link['lost_at'] = time.time()
                        gone = self.grace >= 0 and time.time() - link['lost_at'] >= self.grace
                        link['status'] = 'DISCONNECTED' if gone else 'RECOVERING'
                    continue
                link['ever'] = True
                link['lost_at'] = None
                if answer.get('version') != self.version:
                    link['status'] = 'VERSION_MISMATCH'
                elif answer.get('nodes') != self.nodes:
                    link['status'] = 'NODE_MAP_MISMATCH'
                else:
                    link['status'] = 'CONNECTED'


def daemon(args, version):
    """nvidia-imex -c <config>: runs until SIGTERM."""
    config_path = args[args.index('-c') + 1] if '-c' in args and args.index('-c') + 1 < len(args) else CONFIG
    profile = gd.load_profile()
    state = gd.ensure_state(profile)
    drv = state.get('driver') or {}
    if not drv.get('loaded'):
        print('nvidia-imex: NVIDIA driver not available')
        return 1
    if drv.get('version') != version:
        print('nvidia-imex: IMEX version {0} is not compatible with the loaded NVIDIA driver {1}'.format(
            version, drv.get('version')))
        return 1
    try:
        config = read_config(config_path)
    except (IOError, OSError) as exc:
        print('nvidia-imex: cannot read {0}: {1}'.format(config_path, exc))
        return 1
    log('IMEX version {0} is running with the following configuration options'.format(version))
    nodes_path = config.get('IMEX_NODE_CONFIG_FILE') or NODES_CONFIG

    def stop(signum, frame):
        sys.exit(0)
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    nodes = read_nodes(nodes_path)
    if not nodes:
        log('{0} {1}'.format(NOT_CONFIGURED, nodes_path))
        while True:
            time.sleep(3600)
    imex = Daemon(config, nodes, version)
    if imex.address is None:
        log('none of the addresses in {0} is an address of this node: waiting'.format(nodes_path))
        while True:
            time.sleep(3600)
    for entry in nodes:
        log('node config entry {0}{1}'.format(entry, ' (this node)' if entry == imex.address else ''))
    while True:
        down = gd.fault_active(FAULT_PEER_DOWN)
        if down and imex.serving:
            log('fault imex-peer-down: not answering')
            imex.stop_serving()
            imex.status = 'UNAVAILABLE'
        elif not down and not imex.serving:
            try:
                imex.start_serving()
                log('listening on {0}:{1}, command service {2}'.format(
                    imex.address, imex.server_port, '{0}:{1}'.format(imex.cmd_bind, imex.cmd_port)
                    if imex.cmd_enabled else 'off'))
            except (OSError, socket.error) as exc:
                log('cannot listen: {0}'.format(exc))
                time.sleep(PROBE_INTERVAL)
                continue
        if imex.serving:
            imex.probe()
        time.sleep(PROBE_INTERVAL)


def _unavailable(nodes, address):
    return {'status': 'UNAVAILABLE', 'host': address, 'version': '', 'hostName': 'N/A', 'changed': False,
            'connections': dict((str(j), {'host': host, 'status': 'INVALID', 'changed': False})
                                for j, host in enumerate(nodes))}


def domain(nodes, cmd_port):
    """What -N shows: every node's answer (in parallel), or UNAVAILABLE."""
    answers = [None] * len(nodes)

    def one(i, address):
        answer = _ask(address, cmd_port, 'STATUS', timeout=2.0)
        answers[i] = answer if isinstance(answer, dict) and answer.get('status') else None

    threads = [threading.Thread(target=one, args=(i, address)) for i, address in enumerate(nodes)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    out = {}
    for i, address in enumerate(nodes):
        answer = answers[i]
        if answer is None:
            out[str(i)] = _unavailable(nodes, address)
        else:
            out[str(i)] = dict((k, v) for k, v in answer.items() if k != 'nodes')
    ready = [i for i in range(len(nodes)) if out[str(i)]['status'] == 'READY']
    whole = all(out[str(i)]['connections'].get(str(j), {}).get('status') == 'CONNECTED'
                for i in ready for j in range(len(nodes)))
    status = 'UP' if len(ready) == len(nodes) and whole else 'DOWN' if not ready else 'DEGRADED'
    now = time.time()
    stamp = time.strftime('%m/%d/%Y %H:%M:%S', time.localtime(now)).lstrip('0').replace('/0', '/') + \
        '.{0:03d}'.format(int(now * 1000) % 1000)
    return {'nodes': out, 'timestamp': stamp, 'status': status}


def text_form(dom, nodes, hostnames=False):
    lines = [LEGEND, dom['timestamp'], 'Nodes:']
    for i, address in enumerate(nodes):
        node = dom['nodes'][str(i)]
        extra = ' - {0}'.format(node.get('hostName')) if hostnames else ''
        lines.append('Node #{0:<3} - {1:<15}{2} - {3:<20} - Version: {4}'.format(
            i, address, extra, node['status'], node.get('version') or ''))
    lines.append('')
    lines.append(' Nodes From\\To  ' + ''.join('{0:<4}'.format(j) for j in range(len(nodes))).rstrip())
    for i in range(len(nodes)):
        conns = dom['nodes'][str(i)]['connections']
        cells = ''.join('{0:<4}'.format(LETTERS.get((conns.get(str(j)) or {}).get('status'), '?'))
                        for j in range(len(nodes)))
        lines.append('      {0:>2}        {1}'.format(i, cells.rstrip()))
    lines.append('')
    lines.append('Domain State: {0}'.format(dom['status']))
    return '\n'.join(lines) + '\n'


def ctl(args, version):
    """nvidia-imex-ctl [-c <config>] -N|-q [-j] [-H]."""
    config_path = args[args.index('-c') + 1] if '-c' in args and args.index('-c') + 1 < len(args) else CONFIG
    try:
        config = read_config(config_path)
    except (IOError, OSError) as exc:
        print('Failed to read config file {0}: {1}'.format(config_path, exc))
        return 1
    cmd_port = _port(config, 'IMEX_CMD_PORT', CMD_PORT)
    if '-q' in args:
        bind = config.get('IMEX_CMD_BIND_INTERFACE_IP') or '127.0.0.1'
        answer = _ask(bind, cmd_port, 'QUERY', timeout=2.0)
        if not answer or not answer.get('status'):
            print('Query Status returned error code: 14')
            return 1
        print(answer['status'])
        return 0
    if '-N' not in args and '-n' not in args:
        print('Usage: nvidia-imex-ctl [-i <IP> <PORT>|-u <unix domain socket path>|-c <nvidia-imex config.cfg path>] '
              '<-n|-N|-q|-s|-d|-m> [-t <timeout>]')
        return 1
    nodes_path = config.get('IMEX_NODE_CONFIG_FILE') or NODES_CONFIG
    nodes = read_nodes(nodes_path)
    if not nodes:
        print('{0} {1}'.format(NOT_CONFIGURED, nodes_path))
        return 1
    dom = domain(nodes, cmd_port)
    if '-j' in args:
        print(json.dumps(dom))
    else:
        sys.stdout.write(text_form(dom, nodes, '-H' in args))
    return 0
