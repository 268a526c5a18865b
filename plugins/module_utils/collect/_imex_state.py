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

The formats are parsers/_imex_formats.py.  No Ansible import; the AnsibleModule is used for get_bin_path and the runner.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import errno
import io
import os
import stat

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.collect._node_state import read_file_state
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.collect._runner import CommandNotFound, run
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._imex_formats import (
    CHANNEL_DIR,
    CONFIG_PATH,
    NOT_CONFIGURED,
    ImexError,
    channel_path,
    char_major,
    nodes_config_path,
    parse_config,
    parse_domain_json,
    parse_nodes_config,
)

PROC_DEVICES = '/proc/devices'
CTL = 'nvidia-imex-ctl'
# Files larger than this are not read for their content (a node list of a few dozen addresses is far smaller).
TEXT_MAX_BYTES = 256 * 1024


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
    """The channel device as the driver and /dev show it: ``{'major', 'error', 'dir', 'nodes': {minor: state}}``."""
    devices_path = devices_path or PROC_DEVICES
    out = {'major': None, 'error': None, 'dir': device_state(CHANNEL_DIR), 'nodes': {}}
    text, error = read_text(devices_path)
    if error or text is None:
        out['error'] = error or '{0} does not exist'.format(devices_path)
    else:
        try:
            out['major'] = char_major(text)
        except ImexError as exc:
            out['error'] = str(exc)
    for minor in minors:
        out['nodes'][str(int(minor))] = device_state(channel_path(minor))
    return out


def run_ctl(module, config_path, timeout):
    """``nvidia-imex-ctl -c <config> -N -j``: ``{'path', 'ran', 'rc', 'timed_out', 'domain', 'error',
    'not_configured', 'output'}`` (``domain``: parsers/_imex.parse_domain_json, None when it could not be read)."""
    out = {'path': None, 'ran': False, 'rc': None, 'timed_out': False, 'domain': None, 'error': None,
           'not_configured': False, 'output': ''}
    path = module.get_bin_path(CTL)
    if not path:
        out['error'] = '{0} was not found in PATH (the nvidia-imex package ships it)'.format(CTL)
        return out
    out['path'] = path
    argv = [path, '-c', config_path, '-N', '-j']
    try:
        result = run(module, argv, timeout=timeout)
    except CommandNotFound as exc:
        out['error'] = str(exc)
        return out
    out['ran'] = True
    out['rc'] = result.rc
    text = (result.stdout or '') + (result.stderr or '')
    out['output'] = text.strip()[-2000:]
    if result.timed_out:
        out['timed_out'] = True
        out['error'] = '{0} -N -j did not answer within {1} s'.format(CTL, timeout)
        return out
    if NOT_CONFIGURED in text:
        out['not_configured'] = True
    try:
        out['domain'] = parse_domain_json(result.stdout)
    except ImexError as exc:
        first = text.strip().splitlines()[0] if text.strip() else 'no output'
        out['error'] = '{0} -N -j (rc={1}): {2}'.format(CTL, result.rc, first if result.rc else exc)
        return out
    if result.rc != 0:
        out['error'] = '{0} -N -j exited {1}'.format(CTL, result.rc)
    return out


def collect_imex_facts(module, config_path=CONFIG_PATH, timeout=30, channels=(0,)):
    """The ``imex`` facts (see the module's RETURN): config, node list, channel device, the domain as the ctl reads
    it.  A file that cannot be read is reported in its ``*_error`` key, never raised."""
    facts = {'config_path': config_path, 'config': None, 'config_error': None, 'nodes_path': None,
             'nodes_file': None, 'nodes': None, 'nodes_error': None}
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
    text, error = read_text(nodes)
    if error:
        facts['nodes_error'] = error
    elif text is not None:
        facts['nodes'] = parse_nodes_config(text)
    facts['channels'] = read_channels(channels)
    if facts['config'] is None:
        facts['ctl'] = {'path': None, 'ran': False, 'rc': None, 'timed_out': False, 'domain': None,
                        'error': facts['config_error'] or '{0} does not exist'.format(config_path),
                        'not_configured': False, 'output': ''}
    else:
        facts['ctl'] = run_ctl(module, config_path, timeout)
    return facts
