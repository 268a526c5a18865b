# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the gpufleet.nodeprep collection.
# Its functions may change without notice; do not import it from other collections.
"""NVIDIA IMEX as the node shows it: the daemon's config file, its node list (``nodes_config.cfg``), the IMEX channel
character device in ``/proc/devices``, and ``nvidia-imex-ctl -N -j`` (the domain's state as JSON).

Sources (tests/testbed/REALITY.md, "IMEX"):

* NVIDIA IMEX guide, "IMEX Service Config Options" (``KEY=value`` lines; ``SERVER_PORT`` default 50000,
  ``IMEX_NODE_CONFIG_FILE`` default ``/etc/nvidia-imex/nodes_config.cfg``) and "IMEX Service Command Service"
  (``nvidia-imex-ctl -N``: "full status of the entire IMEX domain", ``-j``: JSON, ``-c``: the config path, default
  ``/etc/nvidia-imex/config.cfg``; ``-N`` "requires config file");
* NVIDIA IMEX guide, "IMEX Channels" (the driver registers the character device ``nvidia-caps-imex-channels``; the
  major number is read from ``/proc/devices`` and "can differ between nodes"; channel N is
  ``/dev/nvidia-caps-imex-channels/channelN``, minor N);
* the JSON of ``nvidia-imex-ctl -N -j``: NVIDIA/DCGM ``dcgmlib/src/tests/DcgmImexManagerTests.cpp`` ("the exact JSON
  format from the original specification": ``nodes`` by index with ``status``, ``host``, ``connections`` (by index:
  ``host``, ``status``, ``changed``), ``version``, ``hostName``; ``timestamp``; the domain's ``status`` UP, DOWN or
  DEGRADED) and real-shaped payloads "confirmed live" in NVIDIA's ISV validation tests (an UP domain, and a DOWN one
  whose nodes are ``UNAVAILABLE`` with ``INVALID`` connections).  The text form's legend names the connection states
  (Invalid, Never Connected, Recovering, Disconnected, Authenticating, version mismatch, node map mismatch,
  Connected); only ``CONNECTED`` and ``INVALID`` are seen in public JSON, so any other word is kept as printed.

Pure functions; no Ansible import; Python 3.6 compatible.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json
import re

CONFIG_PATH = '/etc/nvidia-imex/config.cfg'
NODES_CONFIG_PATH = '/etc/nvidia-imex/nodes_config.cfg'
# The config keys the collection reads, with NVIDIA's documented defaults where the guide gives one.
SERVER_PORT = 50000
CMD_PORT = 50005
CHANNEL_DEVICE = 'nvidia-caps-imex-channels'
CHANNEL_DIR = '/dev/nvidia-caps-imex-channels'
# What nvidia-imex-ctl prints when the node list cannot be read (NVIDIA/DCGM DcgmImexManager.cpp looks for it).
NOT_CONFIGURED = 'Failed to read node configuration file'
# The domain's states (NVIDIA/DCGM dcgm_fields.h DCGM_FI_IMEX_DOMAIN_STATUS) and a node's (DCGM_FI_IMEX_DAEMON_STATUS:
# the states of nvidia-imex-ctl -q).
DOMAIN_STATES = ('UP', 'DOWN', 'DEGRADED')
NODE_STATES = ('INITIALIZING', 'STARTING_AUTH_SERVER', 'WAITING_FOR_PEERS', 'WAITING_FOR_RECOVERY', 'INIT_GPU',
               'READY', 'SHUTTING_DOWN', 'UNAVAILABLE')
READY = 'READY'
CONNECTED = 'CONNECTED'


class ImexError(Exception):
    """An IMEX file or output that cannot be read as NVIDIA documents it (the message says what and where)."""


def channel_path(minor):
    """The device node of IMEX channel ``minor`` (the IMEX guide: /dev/nvidia-caps-imex-channels/channelN)."""
    return '{0}/channel{1}'.format(CHANNEL_DIR, int(minor))


_KEY_RE = re.compile(r'^[A-Za-z_][A-Za-z0-9_]*$')


def parse_config(text):
    """``{KEY: value}`` of an IMEX config file (``KEY=value`` lines; ``#`` comments and blank lines skipped; the last
    line of a key wins, values stripped).  ImexError for a line that is neither."""
    values = {}
    for lineno, line in enumerate((text or '').splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith('#'):
            continue
        key, sep, value = stripped.partition('=')
        key = key.strip()
        if not sep or not _KEY_RE.match(key):
            raise ImexError('line {0}: {1!r} is not KEY=value'.format(lineno, line))
        values[key] = value.strip()
    return values


def config_port(values, key, default):
    """A port of the config (``SERVER_PORT``, ``IMEX_CMD_PORT``) as an int; the default when unset or empty;
    ImexError when it is not a port number."""
    raw = (values or {}).get(key)
    if raw is None or raw == '':
        return default
    try:
        port = int(raw)
    except ValueError:
        raise ImexError('{0}={1!r} is not a port number'.format(key, raw))
    if not 0 < port < 65536:
        raise ImexError('{0}={1} is not a port number (1-65535)'.format(key, port))
    return port


def nodes_config_path(values):
    """The node list the daemon reads: ``IMEX_NODE_CONFIG_FILE``, or NVIDIA's default when unset or empty."""
    return ((values or {}).get('IMEX_NODE_CONFIG_FILE') or '').strip() or NODES_CONFIG_PATH


def parse_nodes_config(text):
    """The addresses of ``nodes_config.cfg`` in their order (one a line; blank lines and ``#`` lines skipped).  The
    order is the node index every IMEX daemon of the domain must agree on."""
    out = []
    for line in (text or '').splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith('#'):
            out.append(stripped)
    return out


def char_major(text, name=CHANNEL_DEVICE):
    """The major number of character device ``name`` in ``/proc/devices`` (``Character devices:`` section, lines
    ``<major> <name>``), or None when the driver has not registered it.  ImexError for a line of that section that
    is not ``<major> <name>``."""
    section = None
    for lineno, line in enumerate((text or '').splitlines(), 1):
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.endswith(':'):
            section = stripped[:-1].strip().lower()
            continue
        if section != 'character devices':
            continue
        parts = stripped.split()
        if len(parts) != 2 or not parts[0].isdigit():
            raise ImexError('/proc/devices line {0}: {1!r} is not "<major> <name>"'.format(lineno, line))
        if parts[1] == name:
            return int(parts[0])
    return None


def _json_object(text):
    """The JSON object in ``text`` (the whole text, or from its first ``{`` to its last ``}``)."""
    text = (text or '').strip()
    try:
        return json.loads(text)
    except ValueError:
        pass
    start, end = text.find('{'), text.rfind('}')
    if start < 0 or end <= start:
        raise ImexError('not JSON: {0!r}'.format(text[:200]))
    try:
        return json.loads(text[start:end + 1])
    except ValueError as exc:
        raise ImexError('not JSON ({0}): {1!r}'.format(exc, text[:200]))


def _index(key, what):
    try:
        return int(key)
    except (TypeError, ValueError):
        raise ImexError('{0}: {1!r} is not a node index'.format(what, key))


def _text(value):
    return '' if value is None else str(value)


def parse_domain_json(text):
    """``nvidia-imex-ctl -N -j`` as ``{'status', 'timestamp', 'nodes': [...]}``; each node ``{'index', 'host',
    'status', 'version', 'hostname', 'connections': [{'index', 'host', 'status'}]}``, nodes and connections in index
    order.  Statuses are upper-cased as DCGM compares them.  ImexError when it is not that JSON."""
    data = _json_object(text)
    if not isinstance(data, dict):
        raise ImexError('expected a JSON object, got {0}'.format(type(data).__name__))
    nodes = data.get('nodes')
    if not isinstance(nodes, dict):
        raise ImexError('"nodes" is {0}, not an object of nodes by index'.format(
            'missing' if nodes is None else type(nodes).__name__))
    out = []
    for key, node in nodes.items():
        index = _index(key, 'nodes')
        if not isinstance(node, dict):
            raise ImexError('nodes.{0} is not an object'.format(key))
        connections = node.get('connections')
        connections = {} if connections is None else connections
        if not isinstance(connections, dict):
            raise ImexError('nodes.{0}.connections is not an object'.format(key))
        conns = []
        for ckey, conn in connections.items():
            if not isinstance(conn, dict):
                raise ImexError('nodes.{0}.connections.{1} is not an object'.format(key, ckey))
            conns.append({'index': _index(ckey, 'nodes.{0}.connections'.format(key)), 'host': _text(conn.get('host')),
                          'status': _text(conn.get('status')).upper()})
        out.append({'index': index, 'host': _text(node.get('host')), 'status': _text(node.get('status')).upper(),
                    'version': _text(node.get('version')), 'hostname': _text(node.get('hostName')),
                    'connections': sorted(conns, key=lambda c: c['index'])})
    status = data.get('status')
    if not isinstance(status, str) or not status:
        raise ImexError('the domain "status" is {0!r}, not a word such as UP'.format(status))
    return {'status': status.upper(), 'timestamp': _text(data.get('timestamp')),
            'nodes': sorted(out, key=lambda n: n['index'])}
