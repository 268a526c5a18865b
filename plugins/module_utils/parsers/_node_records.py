# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the gpufleet.nodeprep collection.
# Its functions may change without notice; do not import it from other collections.
"""The records of the node-state part of gpu_node_facts: systemd's unit names and ``systemctl show`` output, a
path's record from its lstat() result, and the checks of the paths and package names asked for.

Pure functions; no Ansible import; Python 3.6 compatible.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os
import stat

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


# ---------------------------------------------------------------- packages

def check_package_name(name):
    if not name or any(c.isspace() for c in name) or name.startswith('-'):
        raise NodeStateError("packages: '{0}' is not a package name (allowed: a name such as nvidia-persistenced, "
                             "without spaces, not starting with '-')".format(name))
    return name


GLOB_CHARS = ('*', '?', '[')
