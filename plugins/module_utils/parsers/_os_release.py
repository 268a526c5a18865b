# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the gpufleet.nodeprep collection.
# Its functions may change without notice; do not import it from other collections.
"""The OS identity: /etc/os-release (and /etc/debian_version) named as Ansible's setup module names the facts, and
the OS facts the kernel and nvidia_driver roles read from ``ansible_facts``.

Pure functions; no Ansible import; Python 3.6 compatible.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import re

# ---------------------------------------------------------------- OS identity

# os-release ID -> (Ansible's distribution name, os_family), for the platforms the roles support.  Other IDs give no
# identity, and the roles then ask Ansible's setup module as before.
OS_IDS = {
    'rhel': ('RedHat', 'RedHat'), 'rocky': ('Rocky', 'RedHat'), 'almalinux': ('AlmaLinux', 'RedHat'),
    'centos': ('CentOS', 'RedHat'), 'ol': ('OracleLinux', 'RedHat'),
    'ubuntu': ('Ubuntu', 'Debian'), 'debian': ('Debian', 'Debian'),
}


def parse_os_release(text):
    """{KEY: value} of an os-release file (quotes removed)."""
    out = {}
    for line in (text or '').splitlines():
        line = line.strip()
        if not line or line.startswith('#') or '=' not in line:
            continue
        key, value = line.split('=', 1)
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in '"\'':
            value = value[1:-1]
        out[key.strip()] = value
    return out


def os_identity(os_release_text, debian_version_text=None, machine=None):
    """The OS facts the roles read, named as Ansible's setup names them (os_family, distribution,
    distribution_version, distribution_major_version, architecture), from /etc/os-release (and /etc/debian_version
    on Debian, where Ansible takes the point release from it).  None when the ID is not one the roles support."""
    fields = parse_os_release(os_release_text)
    known = OS_IDS.get(fields.get('ID', '').lower())
    version = fields.get('VERSION_ID', '')
    if known is None or not version:
        return None
    if known[0] == 'Debian' and re.match(r'^\d+(\.\d+)*$', (debian_version_text or '').strip()):
        version = debian_version_text.strip()
    return {'os_family': known[1], 'distribution': known[0], 'distribution_version': version,
            'distribution_major_version': version.split('.')[0], 'architecture': machine or None}


# The OS facts the kernel and nvidia_driver roles read, named as Ansible's setup module names them.
OS_FACT_KEYS = ('os_family', 'distribution', 'distribution_version', 'distribution_major_version', 'architecture')


def os_facts(facts):
    """The OS facts the kernel and nvidia_driver roles read, from ``ansible_facts``: Ansible's own when the play has
    them (os_family and distribution_major_version), else those of the gather (``kernel_state.os``, read from
    /etc/os-release in the same round trip), else what ``ansible_facts`` has.  Only the keys present are returned, so
    a role sees ``os_family`` undefined (and runs setup) when neither source has it."""
    facts = facts or {}
    source = facts
    if facts.get('os_family') is None or facts.get('distribution_major_version') is None:
        state_os = (facts.get('kernel_state') or {}).get('os')
        if isinstance(state_os, dict):
            source = state_os
    return dict((key, str(source[key])) for key in OS_FACT_KEYS if source.get(key) is not None)
