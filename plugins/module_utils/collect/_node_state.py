# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the gpufleet.nodeprep collection.
# Its functions may change without notice; do not import it from other collections.
"""Unit, file and package state read in the same round trip as the rest of gpu_node_facts.

The roles decide on the controller, from these facts, whether a template, a boot unit or a package task has
anything to do, so that a node that is already right costs one module execution (the gather).  The collectors take
the AnsibleModule only for get_bin_path and the collection's runner (collect/_runner.run_status); the packages come
from the collection's one package reader (collect/_packages.read_packages); the records are parsers/_node_records.py.
No Ansible import.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import base64
import errno
import glob
import hashlib
import os
import stat

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.collect._packages import PackagesError, read_packages
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.collect._runner import run_status
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._node_records import (
    GLOB_CHARS,
    SHA1_MAX_BYTES,
    check_file_path,
    check_package_name,
    file_record,
    missing_file,
    parse_units_show,
    unit_name,
    units_argv,
)
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._facts_output import to_display
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._package_db import installed_versions


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


def read_raw(path, limit):
    """A file as the controller parses it (parsers/_raw_text.text_of): ``{'path', 'text'}`` (UTF-8), ``{'path',
    'base64'}`` (other bytes, kept as they are), ``{'path', 'errno', 'error'}`` (it cannot be read) or ``{'path',
    'over_limit'}`` (it holds more than ``limit`` bytes: the gather returns no more)."""
    record = {'path': to_display(path)}
    try:
        with open(path, 'rb') as handle:
            data = handle.read(limit + 1)
    except (IOError, OSError) as exc:
        return dict(record, errno=exc.errno, error=to_display(str(exc)))
    if len(data) > limit:
        return dict(record, over_limit=limit)
    try:
        record['text'] = data.decode('utf-8')
    except UnicodeDecodeError:
        record['base64'] = base64.b64encode(data).decode('ascii')
    return record


def collect_contents(paths):
    return dict((path, read_content(path)) for path in paths)
