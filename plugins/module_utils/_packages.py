# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the gpufleet.nodeprep collection.
# Its functions may change without notice; do not import it from other collections.
"""The one reader of the package database: rpm (EL) and dpkg-query (Debian, Ubuntu).

One argv builder (package_argv), one parser per format (parse_rpm, parse_dpkg), one collector (read_packages).  Its
callers: the driver plan's node state (_driver_node.read_driver_node: every installed NVIDIA package, with its
epoch, version, release and arch) and gpu_node_facts' ``packages`` option (_node_state.collect_packages: the
installed version of each name asked for).  The collector takes the AnsibleModule only for get_bin_path and the
collection's runner (_runner.run_status).  No Ansible import.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os

from ansible_collections.gpufleet.nodeprep.plugins.module_utils._runner import run_status

# One query format per tool, tab-separated, one package per line.  EPOCHNUM is 0 for a package without an epoch
# (rpm's EPOCH prints "(none)" then); db:Status-Abbrev is the three letters of dpkg -l (want, status, error).
RPM_QF = '%{NAME}\t%{EPOCHNUM}\t%{VERSION}\t%{RELEASE}\t%{ARCH}\n'
DPKG_FORMAT = '${Package}\t${Version}\t${db:Status-Abbrev}\t${Architecture}\n'
DPKG_STATUS = '/var/lib/dpkg/status'
TOOLS = {'rpm': 'rpm', 'dpkg': 'dpkg-query'}


class PackagesError(Exception):
    """The package database could not be read (the message names the command and what it said)."""


def package_argv(kind, path, names=None):
    """The one query of the package database: every installed package (``names`` None) or the names given.

    ``kind`` 'rpm': ``rpm -qa --qf RPM_QF`` / ``rpm -q --qf RPM_QF NAME...``; 'dpkg': ``dpkg-query -W -f DPKG_FORMAT
    [NAME...]``.
    """
    if kind == 'rpm':
        return [path, '-qa' if names is None else '-q', '--qf', RPM_QF] + list(names or [])
    if kind == 'dpkg':
        return [path, '-W', '-f', DPKG_FORMAT] + list(names or [])
    raise ValueError("package_argv: kind must be 'rpm' or 'dpkg', got {0!r}".format(kind))


def _record(epoch, version, release, arch):
    return {'epoch': epoch, 'version': version, 'release': release, 'arch': arch}


def parse_rpm(text):
    """{name: [{epoch, version, release, arch}]} from the output of package_argv('rpm', ...), in rpm's order.

    Lines that are not five tab-separated fields are left out (rpm -q prints "package X is not installed").
    """
    result = {}
    for line in (text or '').splitlines():
        parts = line.split('\t')
        if len(parts) != 5 or not parts[0]:
            continue
        epoch = int(parts[1]) if parts[1].isdigit() else 0
        result.setdefault(parts[0], []).append(_record(epoch, parts[2], parts[3], parts[4]))
    return result


def parse_dpkg(text):
    """({name: [{epoch, version, release, arch}]}, held names) from the output of package_argv('dpkg', ...).

    Only installed packages count (second letter of Status-Abbrev 'i'): a removed package that kept its
    configuration files ('rc') is not installed.  A held package has 'h' as its first letter.  The Debian version
    '[E:]V[-R]' is split at the first ':' and the last '-'; a name with an architecture qualifier ('libfoo:amd64')
    is reported without it.
    """
    result = {}
    holds = []
    for line in (text or '').splitlines():
        parts = line.split('\t')
        if len(parts) != 4 or len(parts[2]) < 2 or parts[2][1] != 'i':
            continue
        name = parts[0].split(':', 1)[0]
        full = parts[1]
        epoch = 0
        if ':' in full:
            head, full = full.split(':', 1)
            epoch = int(head) if head.isdigit() else 0
        version, dummy, release = full.rpartition('-') if '-' in full else (full, '', '')
        result.setdefault(name, []).append(_record(epoch, version, release, parts[3]))
        if parts[2][0] == 'h' and name not in holds:
            holds.append(name)
    return result, holds


def version_text(record):
    """'E:V-R', 'V-R' or 'V' (no epoch when it is 0, no release when it is empty) of one parsed record."""
    text = record['version']
    if record.get('release'):
        text = '{0}-{1}'.format(text, record['release'])
    if record.get('epoch'):
        text = '{0}:{1}'.format(record['epoch'], text)
    return text


def installed_versions(packages, names):
    """{name: version_text | None} for ``names`` from parse_rpm/parse_dpkg's result; with several versions
    installed (kernels) the one the tool listed last."""
    return dict((name, version_text(packages[name][-1]) if packages.get(name) else None) for name in names)


def package_manager(module, family=None):
    """(kind, path): ('rpm', path) for family 'el', ('dpkg', path) for 'debian'; without a family, dpkg-query where
    the dpkg database is, else rpm.  Raises PackagesError when the tool is not installed."""
    if family == 'el':
        kind = 'rpm'
    elif family == 'debian':
        kind = 'dpkg'
    else:
        dpkg_query = module.get_bin_path('dpkg-query')
        if dpkg_query and os.path.exists(DPKG_STATUS):
            return 'dpkg', dpkg_query
        kind = 'rpm'
    path = module.get_bin_path(TOOLS[kind])
    if path:
        return kind, path
    if family is None:
        raise PackagesError('neither dpkg-query nor rpm found in PATH')
    raise PackagesError('{0} is not installed, so the installed packages cannot be listed'.format(TOOLS[kind]))


def read_packages(module, names=None, family=None):
    """(kind, {name: [records]}, held names) of the installed packages (``names`` None) or of the names given, with
    one rpm or dpkg-query call.  A name that is not installed is simply absent (rpm -q exits with the number of such
    names, dpkg-query -W with 1).  Raises PackagesError when the database cannot be read."""
    kind, path = package_manager(module, family)
    argv = package_argv(kind, path, names)
    what = ' '.join([TOOLS[kind]] + argv[1:2])
    rc, out, err = run_status(module, argv)
    if kind == 'rpm':
        packages, holds = parse_rpm(out), []
        missing = sum(1 for name in names or [] if name not in packages)
        failed = rc != 0 and (names is None or rc != missing)
    else:
        packages, holds = parse_dpkg(out)
        failed = rc not in (0, 1) or (rc == 1 and names is None)
    if failed:
        raise PackagesError('{0} failed (rc={1}): {2}'.format(what, rc, err.strip()))
    return kind, packages, holds
