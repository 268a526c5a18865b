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
from ansible.module_utils.six import string_types

from ansible_collections.gpufleet.nodeprep.plugins.module_utils._node_state import (
    NodeStateError, path_changes, unit_name)
from ansible_collections.gpufleet.nodeprep.plugins.module_utils._gpu_settings import role_plan
from ansible_collections.gpufleet.nodeprep.plugins.module_utils._nic import offload_plan, unit_env_text


def _plain(value):
    """Facts and role variables arrive as Ansible's own str/list/dict types; the rules take plain ones."""
    if isinstance(value, string_types):
        return str(value)
    if isinstance(value, dict):
        return dict((_plain(k), _plain(v)) for k, v in value.items())
    if is_sequence(value):
        return [_plain(v) for v in value]
    return value


def _dict(value, name, what):
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise AnsibleFilterError('{0}: {1} must be a dict, got {2}'.format(name, what, type(value).__name__))
    return _plain(value)


def nodeprep_path_changes(files, wants):
    """Reasons why copy/template/file tasks for ``wants`` would change paths, from ansible_facts.nodeprep_files."""
    if not is_sequence(wants) or isinstance(wants, string_types):
        raise AnsibleFilterError('nodeprep_path_changes: wants must be a list of dicts with path and state, got '
                                 '{0!r}'.format(wants))
    wants = _plain(wants)
    for want in wants:
        if not isinstance(want, dict) or not want.get('path'):
            raise AnsibleFilterError('nodeprep_path_changes: each want needs a path, got {0!r}'.format(want))
        if want.get('state', 'file') not in ('file', 'directory', 'link', 'absent'):
            raise AnsibleFilterError('nodeprep_path_changes: {0}: state {1!r} is not file, directory, link or '
                                     'absent'.format(want['path'], want.get('state')))
    return path_changes(_dict(files, 'nodeprep_path_changes', 'the input (ansible_facts.nodeprep_files)'), wants)


def nodeprep_unit_names(names):
    """The keys gpu_node_facts gives these units in nodeprep_units ('.service' added when there is no suffix)."""
    if not is_sequence(names) or isinstance(names, string_types):
        raise AnsibleFilterError('nodeprep_unit_names: input must be a list of unit names, got {0!r}'.format(names))
    try:
        return [unit_name(str(name)) for name in names]
    except NodeStateError as exc:
        raise AnsibleFilterError('nodeprep_unit_names: {0}'.format(exc))


def nodeprep_gpu_settings_plan(nvidia, settings, nvidia_smi, daemon, files=None, contents=None, replay_path=None,
                               record_path=None, boot_id_path='/proc/sys/kernel/random/boot_id', apply=True,
                               host=None):
    """Reasons why the gpu_settings role's nvidia_gpu task would change something ([] when it would not)."""
    nvidia = _dict(nvidia, 'nodeprep_gpu_settings_plan', 'the input (ansible_facts.nvidia)')
    settings = _dict(settings, 'nodeprep_gpu_settings_plan', 'settings')
    files = _dict(files, 'nodeprep_gpu_settings_plan', 'files')
    contents = _dict(contents, 'nodeprep_gpu_settings_plan', 'contents')
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
    nics = _dict(nics, 'nodeprep_nic_offload_plan', 'the input (ansible_facts.nics)')
    if not is_sequence(selected) or isinstance(selected, string_types):
        raise AnsibleFilterError('nodeprep_nic_offload_plan: selected must be a list of interface names, got '
                                 '{0!r}'.format(selected))
    features = _dict(features, 'nodeprep_nic_offload_plan', 'features')
    return offload_plan(nics, _plain(selected), dict((k, bool(v)) for k, v in features.items()), bool(ignore_fixed))


def nodeprep_nic_offload_env_text(persistence, features):
    """Text of the boot unit's environment file for one NIC (its persistence entry from nic_offload or the plan)."""
    return unit_env_text(_dict(persistence, 'nodeprep_nic_offload_env_text', 'the input (a persistence entry)'),
                         _dict(features, 'nodeprep_nic_offload_env_text', 'features'))


class FilterModule(object):
    def filters(self):
        return {
            'nodeprep_path_changes': nodeprep_path_changes,
            'nodeprep_unit_names': nodeprep_unit_names,
            'nodeprep_gpu_settings_plan': nodeprep_gpu_settings_plan,
            'nodeprep_nic_offload_plan': nodeprep_nic_offload_plan,
            'nodeprep_nic_offload_env_text': nodeprep_nic_offload_env_text,
        }
