# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the gpufleet.nodeprep collection.
# Its functions may change without notice; do not import it from other collections.
"""The one reader of the package database: rpm (EL) and dpkg-query (Debian, Ubuntu).

Its callers: the driver plan's node state (collect/_driver_node.read_driver_node: every installed NVIDIA package, with
its epoch, version, release and arch) and gpu_node_facts' ``packages`` option (collect/_node_state.collect_packages:
the installed version of each name asked for).  It takes the AnsibleModule only for get_bin_path and the
collection's runner (collect/_runner.run_status); the formats are parsers/_package_db.py.  No Ansible import.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.collect._runner import run_status
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._package_db import (
    package_argv,
    parse_dpkg,
    parse_rpm,
)

DPKG_STATUS = '/var/lib/dpkg/status'
TOOLS = {'rpm': 'rpm', 'dpkg': 'dpkg-query'}


class PackagesError(Exception):
    """The package database could not be read (the message names the command and what it said)."""


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
