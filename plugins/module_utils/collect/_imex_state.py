# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the gpufleet.nodeprep collection.
# Its functions may change without notice; do not import it from other collections.
"""The ``imex`` subset of gpu_node_facts: what the node shows of NVIDIA IMEX, read in the same round trip as the
rest of the gather.  It decides nothing (the imex role's plan, plans/_plan_imex.py, judges it on the controller).

* the daemon's config file (``nodeprep_imex_config``, NVIDIA's ``/etc/nvidia-imex/config.cfg``) and the node list
  it names (``IMEX_NODE_CONFIG_FILE``): state (SHA-1, mode, owner) and addresses in order;
* the IMEX channel device: the major of ``nvidia-caps-imex-channels`` in ``/proc/devices`` and what
  ``/dev/nvidia-caps-imex-channels/channel<N>`` is;
* ``nvidia-imex-ctl -c <config> -N -j`` (the domain's state) through the collection's runner, with a timeout: the
  ctl asks each node's IMEX command service, so an unreachable peer costs it time.

It parses only the config (to find the node list): the node list, ``/proc/devices`` and the ctl's output are returned
as read (bounded: TEXT_MAX_BYTES, CTL_MAX_BYTES), and parsers/_imex_formats.imex_facts turns them into the ``imex``
namespace on the controller.  No Ansible import; the AnsibleModule is used for get_bin_path and the runner.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import errno
import io
import os
import stat

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.collect._node_state import read_file_state, read_raw
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.collect._runner import CommandNotFound, run
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._imex_config import (
    CHANNEL_DIR,
    CONFIG_PATH,
    ImexError,
    channel_path,
    nodes_config_path,
    parse_config,
)

PROC_DEVICES = '/proc/devices'
CTL = 'nvidia-imex-ctl'
# The most the node returns of a file (a node list of a few dozen addresses is far smaller; parsers/_imex_formats
# holds the same bounds) and of the ctl's output (the JSON of a 72-node domain, every node with 72 connections, is
# about 400 KB).
TEXT_MAX_BYTES = 256 * 1024
CTL_MAX_BYTES = 4 * 1024 * 1024


def read_text(path, limit=TEXT_MAX_BYTES):
    """(text, error): the file's text, or None and why (None and None when it does not exist)."""
    try:
        with io.open(path, 'rb') as handle:
            data = handle.read(limit + 1)
    except (IOError, OSError) as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            return None, None
        return None, 'cannot read {0}: {1}'.format(path, os.strerror(exc.errno) if exc.errno else exc)
    if len(data) > limit:
        return None, '{0} is larger than {1} bytes'.format(path, limit)
    return data.decode('utf-8', 'replace'), None


def device_state(path):
    """{exists, type ('char', 'directory', 'file', ...), major, minor, mode, uid, gid} of ``path`` (not followed)."""
    try:
        st = os.lstat(path)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            return {'exists': False}
        raise
    kinds = ((stat.S_ISCHR, 'char'), (stat.S_ISDIR, 'directory'), (stat.S_ISREG, 'file'), (stat.S_ISLNK, 'link'),
             (stat.S_ISBLK, 'block'))
    kind = next((name for test, name in kinds if test(st.st_mode)), 'other')
    out = {'exists': True, 'type': kind, 'mode': '{0:04o}'.format(stat.S_IMODE(st.st_mode)), 'uid': st.st_uid,
           'gid': st.st_gid, 'major': None, 'minor': None}
    if kind == 'char':
        out['major'], out['minor'] = os.major(st.st_rdev), os.minor(st.st_rdev)
    return out


def read_channels(minors, devices_path=None):
    """The channel device as the driver and /dev show it: ``{'devices' (/proc/devices as read), 'dir', 'nodes':
    {minor: state}}``."""
    out = {'devices': read_raw(devices_path or PROC_DEVICES, TEXT_MAX_BYTES), 'dir': device_state(CHANNEL_DIR),
           'nodes': {}}
    for minor in minors:
        out['nodes'][str(int(minor))] = device_state(channel_path(minor))
    return out


def run_ctl(module, config_path, timeout):
    """``nvidia-imex-ctl -c <config> -N -j``: ``{'path', 'ran', 'rc', 'timed_out', 'error', 'stdout', 'stderr',
    'over_limit'}`` (its output as printed; none of it, and ``over_limit``, past CTL_MAX_BYTES characters;
    parsers/_imex_formats.imex_facts reads it)."""
    out = {'path': None, 'ran': False, 'rc': None, 'timed_out': False, 'error': None, 'stdout': '', 'stderr': '',
           'over_limit': None}
    path = module.get_bin_path(CTL)
    if not path:
        out['error'] = '{0} was not found in PATH (the nvidia-imex package ships it)'.format(CTL)
        return out
    out['path'] = path
    try:
        result = run(module, [path, '-c', config_path, '-N', '-j'], timeout=timeout)
    except CommandNotFound as exc:
        out['error'] = str(exc)
        return out
    out.update(ran=True, rc=result.rc, timed_out=bool(result.timed_out), timeout=timeout, stdout=result.stdout or '',
               stderr=result.stderr or '')
    if len(out['stdout']) + len(out['stderr']) > CTL_MAX_BYTES:
        out.update(stdout=None, stderr=None, over_limit=CTL_MAX_BYTES)
    return out


def collect_imex_facts(module, config_path=CONFIG_PATH, timeout=30, channels=(0,)):
    """What the node holds of IMEX (parsers/_imex_formats.imex_facts makes the ``imex`` facts of it): the config
    parsed, the node list's state and text, the channel device, the ctl's output.  A file that cannot be read is
    reported, never raised."""
    facts = {'config_path': config_path, 'config': None, 'config_error': None, 'nodes_path': None,
             'nodes_file': None}
    text, error = read_text(config_path)
    if error:
        facts['config_error'] = error
    elif text is not None:
        try:
            facts['config'] = parse_config(text)
        except ImexError as exc:
            facts['config_error'] = '{0}: {1}'.format(config_path, exc)
    nodes = nodes_config_path(facts['config'])
    facts['nodes_path'] = nodes
    facts['nodes_file'] = read_file_state(nodes)
    facts['nodes_read'] = read_raw(nodes, TEXT_MAX_BYTES)
    facts['channels'] = read_channels(channels)
    facts['ctl'] = None if facts['config'] is None else run_ctl(module, config_path, timeout)
    return facts
