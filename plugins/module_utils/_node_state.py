# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the gpufleet.nodeprep collection.
# Its functions may change without notice; do not import it from other collections.
"""Unit, file and package state read in the same round trip as the rest of gpu_node_facts.

The roles decide on the controller, from these facts, whether a template, a boot unit or a package task has
anything to do, so that a node that is already right costs one module execution (the gather).

Pure functions (parsers, argv builders, file state from an lstat result); the collectors at the end take the
AnsibleModule only for get_bin_path and the collection's runner (_runner.run_status); the packages come from the
collection's one package reader (_packages.read_packages).  No Ansible import.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import errno
import glob
import hashlib
import os
import stat

from ansible_collections.gpufleet.nodeprep.plugins.module_utils._packages import (
    PackagesError,
    installed_versions,
    read_packages,
)
from ansible_collections.gpufleet.nodeprep.plugins.module_utils._runner import run_status

UNIT_PROPERTIES = ('Id', 'LoadState', 'ActiveState', 'SubState', 'UnitFileState', 'FragmentPath', 'DropInPaths')
# systemd.unit(5): the unit types.  A name without one of these suffixes is a service (as systemctl assumes).
UNIT_SUFFIXES = ('.service', '.socket', '.device', '.mount', '.automount', '.swap', '.target', '.path', '.timer',
                 '.slice', '.scope')
SHA1_MAX_BYTES = 1024 * 1024


class NodeStateError(Exception):
    """A unit, file or package option that cannot be read (the message names the value and what is allowed)."""


# ---------------------------------------------------------------- units

def unit_name(name):
    """The unit name systemctl uses for ``name``: '.service' added when it has no unit type suffix."""
    if not name or not name.strip() or any(c.isspace() for c in name) or name.startswith('-'):
        raise NodeStateError("units: '{0}' is not a unit name (allowed: a name such as nvidia-persistenced or "
                             "nvidia-persistenced.service, without spaces, not starting with '-')".format(name))
    return name if name.endswith(UNIT_SUFFIXES) else name + '.service'


def units_argv(systemctl, names):
    """ONE systemctl show for every unit; the names are already normalised by unit_name()."""
    return [systemctl, 'show', '--property=' + ','.join(UNIT_PROPERTIES), '--'] + list(names)


def _unit_record(props):
    def value(key):
        raw = props.get(key, '')
        return raw if raw != '' else None
    dropins = props.get('DropInPaths', '')
    return {'load': value('LoadState') or 'not-found', 'active': value('ActiveState'), 'sub': value('SubState'),
            'enabled': value('UnitFileState'), 'fragment': value('FragmentPath'),
            'dropins': dropins.split() if dropins else []}


def parse_units_show(text, names):
    """{name: record} from ``systemctl show --property=...`` over ``names`` (normalised, in the order given).

    systemctl prints one block per unit, in the order asked, separated by a blank line; a unit that does not exist
    still gets a block (LoadState=not-found).  An alias (sshd.service for ssh.service) prints the real unit's Id, so
    blocks are matched by position; a name without a block is reported as not-found.
    """
    blocks = []
    current = {}
    for line in text.splitlines():
        if not line.strip():
            if current:
                blocks.append(current)
                current = {}
            continue
        key, sep, value = line.partition('=')
        if sep:
            current[key.strip()] = value.strip()
    if current:
        blocks.append(current)
    result = {}
    by_id = dict((block.get('Id'), block) for block in blocks if block.get('Id'))
    for index, name in enumerate(names):
        if len(blocks) == len(names):
            block = blocks[index]
        else:
            block = by_id.get(name, {})
        result[name] = _unit_record(block)
    return result


# ---------------------------------------------------------------- files

def check_file_path(path):
    if not path or not os.path.isabs(path):
        raise NodeStateError("files: '{0}' is not an absolute path (allowed: absolute paths such as "
                             "/etc/nccl.conf)".format(path))
    return path


def _file_type(mode):
    if stat.S_ISLNK(mode):
        return 'link'
    if stat.S_ISREG(mode):
        return 'file'
    if stat.S_ISDIR(mode):
        return 'directory'
    return 'other'


def missing_file():
    return {'exists': False, 'type': None, 'mode': None, 'uid': None, 'gid': None, 'size': None, 'sha1': None,
            'target': None}


def file_record(st, sha1=None, target=None):
    """The record of one path from its lstat() result; sha1 and target are read by the caller."""
    return {'exists': True, 'type': _file_type(st.st_mode), 'mode': '{0:04o}'.format(stat.S_IMODE(st.st_mode)),
            'uid': st.st_uid, 'gid': st.st_gid, 'size': st.st_size, 'sha1': sha1, 'target': target}


def sha1_of(path, limit=SHA1_MAX_BYTES):
    """Hex SHA-1 of the file's content, None when it is larger than ``limit`` or cannot be read."""
    # SHA-1 because the controller compares it with Ansible's hash('sha1') filter; it identifies content only.
    digest = hashlib.sha1()  # nosec B324
    total = 0
    try:
        with open(path, 'rb') as handle:
            while True:
                chunk = handle.read(65536)
                if not chunk:
                    break
                total += len(chunk)
                if total > limit:
                    return None
                digest.update(chunk)
    except (IOError, OSError):
        return None
    return digest.hexdigest()


def read_file_state(path):
    """{exists, type, mode, uid, gid, size, sha1, target} of ``path`` (lstat: a link is reported, not followed)."""
    check_file_path(path)
    try:
        st = os.lstat(path)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            return missing_file()
        raise
    sha1 = None
    target = None
    if stat.S_ISREG(st.st_mode) and st.st_size <= SHA1_MAX_BYTES:
        sha1 = sha1_of(path)
    elif stat.S_ISLNK(st.st_mode):
        target = os.readlink(path)
    return file_record(st, sha1=sha1, target=target)


# ---------------------------------------------------------------- packages

def check_package_name(name):
    if not name or any(c.isspace() for c in name) or name.startswith('-'):
        raise NodeStateError("packages: '{0}' is not a package name (allowed: a name such as nvidia-persistenced, "
                             "without spaces, not starting with '-')".format(name))
    return name


# ---------------------------------------------------------------- collectors (take the AnsibleModule)

def collect_units(module, names):
    """(units, error): error is None, or a message when systemd cannot be asked (then units is {})."""
    wanted = []
    for name in names:
        normal = unit_name(name)
        if normal not in wanted:
            wanted.append(normal)
    if not wanted:
        return {}, None
    if not os.path.isdir('/run/systemd/system'):
        return {}, 'this host was not booted with systemd (/run/systemd/system is missing)'
    systemctl = module.get_bin_path('systemctl')
    if systemctl is None:
        return {}, 'systemctl not found in PATH'
    rc, out, err = run_status(module, units_argv(systemctl, wanted))
    if rc != 0:
        return {}, 'systemctl show failed (rc={0}): {1}'.format(rc, err.strip())
    return parse_units_show(out, wanted), None


GLOB_CHARS = ('*', '?', '[')


def collect_files(paths):
    """{path: state}; a path with glob characters (``*``, ``?``, ``[``) reports each existing path it matches."""
    result = {}
    for path in paths:
        check_file_path(path)
        if any(char in path for char in GLOB_CHARS):
            for match in sorted(glob.glob(path)):
                result[match] = read_file_state(match)
        else:
            result[path] = read_file_state(path)
    return result


def collect_packages(module, names):
    """(packages, error): {name: installed version | None} from one rpm -q or dpkg-query -W call for every name
    (_packages.read_packages); error is None, or why the package database could not be read (then every name is
    None)."""
    wanted = []
    for name in names:
        if check_package_name(name) not in wanted:
            wanted.append(name)
    if not wanted:
        return {}, None
    try:
        dummy, packages, dummy2 = read_packages(module, wanted)
    except PackagesError as exc:
        return dict((name, None) for name in wanted), str(exc)
    return installed_versions(packages, wanted), None


# ---------------------------------------------------------------- decisions on the controller

def path_change(state, want):
    """Why a copy/template/file task for ``want`` would change the path whose gathered state is ``state``.

    ``want``: {path, state: 'file'|'directory'|'link'|'absent', sha1 (file content), mode ('0644'), uid, gid, src
    (link target)}; uid and gid default to 0 (root), mode is not compared when missing.  ``state`` is the entry of
    ``nodeprep_files`` (None when the path was not gathered).  Returns None when nothing would change, else a short
    reason.  What cannot be told from the facts (not gathered, no SHA-1 because the file is over 1 MiB or unreadable)
    is a change: the task then runs and decides itself.
    """
    path = want.get('path')
    kind = want.get('state', 'file')
    if not isinstance(state, dict) or 'exists' not in state:
        return '{0}: not gathered'.format(path)
    if kind == 'absent':
        return '{0}: exists'.format(path) if state['exists'] else None
    if not state['exists']:
        return '{0}: missing'.format(path)
    if state.get('type') != kind:
        return '{0}: is a {1}, not a {2}'.format(path, state.get('type'), kind)
    if kind == 'link':
        if state.get('target') != want.get('src'):
            return '{0}: points to {1}, not {2}'.format(path, state.get('target'), want.get('src'))
        return None
    if kind == 'file':
        if state.get('sha1') is None:
            return '{0}: content not known (over {1} bytes or unreadable)'.format(path, SHA1_MAX_BYTES)
        if state['sha1'] != want.get('sha1'):
            return '{0}: content differs'.format(path)
    if want.get('mode') is not None and state.get('mode') != want['mode']:
        return '{0}: mode {1}, not {2}'.format(path, state.get('mode'), want['mode'])
    for key in ('uid', 'gid'):
        if state.get(key) != want.get(key, 0):
            return '{0}: {1} {2}, not {3}'.format(path, key, state.get(key), want.get(key, 0))
    return None


CONTENT_MAX_BYTES = 64 * 1024


def read_content(path, limit=CONTENT_MAX_BYTES):
    """Text of a small file (UTF-8, undecodable bytes replaced), None when absent, unreadable or over ``limit``."""
    check_file_path(path)
    try:
        with open(path, 'rb') as handle:
            data = handle.read(limit + 1)
    except (IOError, OSError):
        return None
    if len(data) > limit:
        return None
    return data.decode('utf-8', 'replace')


def collect_contents(paths):
    return dict((path, read_content(path)) for path in paths)
