# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The readiness role's settings: every name the checks read, each falling back to the owning role's default.

A default has one home, the owning role's defaults/main.yml. The readiness play does not run that role, so
roles/readiness/vars/main.yml repeats the value as the fallback of ``nodeprep_x | default(...)``; this test fails as
soon as the two differ, and when the readiness role reads another role's files.
"""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os
import re

import pytest
import yaml

from ansible_collections.gpufleet.nodeprep.plugins.module_utils import _readiness as r

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from ansible_collections.gpufleet.nodeprep.tests.unit.plugins.module_utils import test_readiness_facts as F  # noqa: E402

OWNERS = ('kernel', 'nvidia_driver', 'gpu_settings', 'memlock', 'shm', 'nccl', 'nic_offload', 'readiness')
# Variables no role's defaults define (docs/contracts.md: unset means 0).
UNOWNED = {'nodeprep_expected_gpus': 0}


def _load(*parts):
    with open(os.path.join(ROOT, *parts)) as handle:
        return yaml.safe_load(handle)


def owning_defaults():
    found = {}
    for role in OWNERS:
        for name, value in (_load('roles', role, 'defaults', 'main.yml') or {}).items():
            found[name] = (role, value)
    return found


def test_names_are_exactly_the_checks_settings():
    assert list(_load('roles', 'readiness', 'vars', 'main.yml')['__nodeprep_readiness_settings']) == \
        list(r.PASSED_SETTING_NAMES)


@pytest.mark.parametrize('name', r.PASSED_SETTING_NAMES)
def test_fallback_is_the_owning_roles_default(name):
    fallback = F.role_settings()[name]
    owners = owning_defaults()
    if name in UNOWNED:
        assert name not in owners
        assert fallback == UNOWNED[name]
        return
    role, value = owners[name]
    assert fallback == value, '{0}: readiness falls back to {1!r}, role {2} defaults to {3!r}'.format(
        name, fallback, role, value)


def test_readiness_role_reads_no_other_role_files():
    folder = os.path.join(ROOT, 'roles', 'readiness')
    for base, _dirs, files in os.walk(folder):
        if os.path.basename(base) not in ('tasks', 'vars', 'defaults', 'meta', 'handlers', 'templates'):
            continue
        for name in files:
            with open(os.path.join(base, name)) as handle:
                text = handle.read()
            assert not re.search(r'role_path\s*\|\s*dirname|\.\./|roles_dir|include_vars', text), \
                os.path.join(base, name)
