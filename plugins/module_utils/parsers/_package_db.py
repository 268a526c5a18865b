# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the gpufleet.nodeprep collection.
# Its functions may change without notice; do not import it from other collections.
"""The package database's formats: the one query (package_argv: rpm -q/-qa with a query format, dpkg-query -W with a
show format), one parser per format (parse_rpm, parse_dpkg) and the version text of a parsed record.

The collector that runs the query is collect/_packages.read_packages.  Pure functions; no Ansible import.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

# One query format per tool, tab-separated, one package per line.  EPOCHNUM is 0 for a package without an epoch
# (rpm's EPOCH prints "(none)" then); db:Status-Abbrev is the three letters of dpkg -l (want, status, error).
RPM_QF = '%{NAME}\t%{EPOCHNUM}\t%{VERSION}\t%{RELEASE}\t%{ARCH}\n'
DPKG_FORMAT = '${Package}\t${Version}\t${db:Status-Abbrev}\t${Architecture}\n'


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
