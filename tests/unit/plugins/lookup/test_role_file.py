# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Tests of plugins/lookup/role_file.py and plugins/plugin_utils/_collection.py: a role's file wherever the task is."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os

import pytest

from ansible.errors import AnsibleLookupError

from ansible_collections.gpufleet.nodeprep.plugins.lookup import role_file
from ansible_collections.gpufleet.nodeprep.plugins.plugin_utils import _collection


def test_a_file_of_a_role_is_found():
    path = role_file.LookupModule().run(['nccl/defaults/main.yml'])[0]
    assert os.path.isabs(path)
    assert path == os.path.realpath(os.path.join(_collection.ROLES_DIR, 'nccl', 'defaults', 'main.yml'))
    assert os.path.isfile(path)


def test_several_terms_give_several_paths():
    paths = role_file.LookupModule().run(['gpu_settings/files/nodeprep-gpu-settings', 'kernel/defaults/main.yml'])
    assert [os.path.basename(p) for p in paths] == ['nodeprep-gpu-settings', 'main.yml']


@pytest.mark.parametrize('term', ['../galaxy.yml', 'nccl/../../galaxy.yml', '/etc/passwd', '', 'nccl'])
def test_terms_outside_a_role_are_refused(term):
    with pytest.raises(AnsibleLookupError) as err:
        role_file.LookupModule().run([term])
    assert 'is not <role>/<path in the role>' in str(err.value)


def test_a_missing_file_is_refused_naming_the_roles():
    with pytest.raises(AnsibleLookupError) as err:
        role_file.LookupModule().run(['nccl/templates/nccl.conf.j3'])
    assert 'nccl/templates/nccl.conf.j3 names no file' in str(err.value)
    assert 'gpu_settings' in str(err.value)
