# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Controller-side plans: what the settings roles would change, decided from the facts gathered once.

Thin wrappers: every rule lives in plugins/module_utils (_node_state, _gpu_settings, _nic), which the modules use too.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.collections import is_sequence

from ansible_collections.gpufleet.nodeprep.plugins.module_utils._node_state import (
    NodeStateError, path_changes, unit_name)
from ansible_collections.gpufleet.nodeprep.plugins.module_utils._gpu_settings import role_plan
from ansible_collections.gpufleet.nodeprep.plugins.module_utils._nic import offload_plan, unit_env_text
from ansible_collections.gpufleet.nodeprep.plugins.plugin_utils._filter_input import plain, plain_dict


def nodeprep_path_changes(files, wants):
    """Reasons why copy/template/file tasks for ``wants`` would change paths, from ansible_facts.nodeprep_files."""
    if not is_sequence(wants) or isinstance(wants, str):
        raise AnsibleFilterError('nodeprep_path_changes: wants must be a list of dicts with path and state, got '
                                 '{0!r}'.format(wants))
    wants = plain(wants)
    for want in wants:
        if not isinstance(want, dict) or not want.get('path'):
            raise AnsibleFilterError('nodeprep_path_changes: each want needs a path, got {0!r}'.format(want))
        if want.get('state', 'file') not in ('file', 'directory', 'link', 'absent'):
            raise AnsibleFilterError('nodeprep_path_changes: {0}: state {1!r} is not file, directory, link or '
                                     'absent'.format(want['path'], want.get('state')))
    return path_changes(plain_dict(files, 'nodeprep_path_changes', 'the input (ansible_facts.nodeprep_files)',
                                   none_is_empty=True), wants)


def nodeprep_unit_names(names):
    """The keys gpu_node_facts gives these units in nodeprep_units ('.service' added when there is no suffix)."""
    if not is_sequence(names) or isinstance(names, str):
        raise AnsibleFilterError('nodeprep_unit_names: input must be a list of unit names, got {0!r}'.format(names))
    try:
        return [unit_name(str(name)) for name in names]
    except NodeStateError as exc:
        raise AnsibleFilterError('nodeprep_unit_names: {0}'.format(exc))


def nodeprep_gpu_settings_plan(nvidia, settings, nvidia_smi, daemon, files=None, contents=None, replay_path=None,
                               record_path=None, boot_id_path='/proc/sys/kernel/random/boot_id', apply=True,
                               host=None):
    """Reasons why the gpu_settings role's nvidia_gpu task would change something ([] when it would not)."""
    nvidia = plain_dict(nvidia, 'nodeprep_gpu_settings_plan', 'the input (ansible_facts.nvidia)', none_is_empty=True)
    settings = plain_dict(settings, 'nodeprep_gpu_settings_plan', 'settings', none_is_empty=True)
    files = plain_dict(files, 'nodeprep_gpu_settings_plan', 'files', none_is_empty=True)
    contents = plain_dict(contents, 'nodeprep_gpu_settings_plan', 'contents', none_is_empty=True)
    reasons = []
    replay_sha1 = None
    if replay_path:
        state = files.get(replay_path)
        if not isinstance(state, dict):
            reasons.append('{0}: not gathered'.format(replay_path))
        elif state.get('exists'):
            replay_sha1 = state.get('sha1') or 'unknown'
    if record_path and (record_path not in contents or boot_id_path not in contents):
        reasons.append('the clock lock record and the boot id were not gathered')
    boot = (contents.get(boot_id_path) or '').strip() or None
    reasons.extend(role_plan(nvidia, settings, str(nvidia_smi), bool(daemon), contents.get(record_path), boot,
                             replay_sha1, replay_path or None, record_path, bool(apply), host))
    return reasons


def nodeprep_nic_offload_plan(nics, selected, features, ignore_fixed=False):
    """Per selected NIC: what nic_offload would change and how it persists (see _nic.offload_plan)."""
    nics = plain_dict(nics, 'nodeprep_nic_offload_plan', 'the input (ansible_facts.nics)', none_is_empty=True)
    if not is_sequence(selected) or isinstance(selected, str):
        raise AnsibleFilterError('nodeprep_nic_offload_plan: selected must be a list of interface names, got '
                                 '{0!r}'.format(selected))
    features = plain_dict(features, 'nodeprep_nic_offload_plan', 'features', none_is_empty=True)
    return offload_plan(nics, plain(selected), dict((k, bool(v)) for k, v in features.items()), bool(ignore_fixed))


def nodeprep_nic_offload_env_text(persistence, features):
    """Text of the boot unit's environment file for one NIC (its persistence entry from nic_offload or the plan)."""
    return unit_env_text(plain_dict(persistence, 'nodeprep_nic_offload_env_text', 'the input (a persistence entry)',
                                    none_is_empty=True),
                         plain_dict(features, 'nodeprep_nic_offload_env_text', 'features', none_is_empty=True))


class FilterModule(object):
    def filters(self):
        return {
            'nodeprep_path_changes': nodeprep_path_changes,
            'nodeprep_unit_names': nodeprep_unit_names,
            'nodeprep_gpu_settings_plan': nodeprep_gpu_settings_plan,
            'nodeprep_nic_offload_plan': nodeprep_nic_offload_plan,
            'nodeprep_nic_offload_env_text': nodeprep_nic_offload_env_text,
        }
