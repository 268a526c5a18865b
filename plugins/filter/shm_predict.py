# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function
__metaclass__ = type

from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.collections import is_sequence

from ansible_collections.gpufleet.nodeprep.plugins.module_utils._shm import ShmError, predict_before_gpu_memory, shm_plan
from ansible_collections.gpufleet.nodeprep.plugins.plugin_utils._filter_input import plain, plain_dict


def shm_predict(shm, min_bytes, mount_options, fstab=True, remount=True, shrink=False):
    """What check mode can predict for /dev/shm before the GPU memory can be read (see _shm.py)."""
    if not isinstance(shm, dict):
        raise AnsibleFilterError('shm_predict: input must be ansible_facts.shm (a dict), got {0}'.format(
            type(shm).__name__))
    try:
        min_bytes = int(min_bytes)
    except (TypeError, ValueError):
        raise AnsibleFilterError('shm_predict: min_bytes must be a number of bytes, got {0!r}'.format(min_bytes))
    if not is_sequence(mount_options) or isinstance(mount_options, str):
        raise AnsibleFilterError('shm_predict: mount_options must be a list, got {0!r}'.format(mount_options))
    return predict_before_gpu_memory(plain(shm), min_bytes, plain(mount_options), bool(fstab), bool(remount),
                                     bool(shrink))


def nodeprep_shm_plan(shm, gpu_memory_mib, settings):
    """The shm role's decision for /dev/shm from the shm facts and the GPUs' memory (see _shm.shm_plan)."""
    if shm is not None and not isinstance(shm, dict):
        raise AnsibleFilterError('nodeprep_shm_plan: input must be ansible_facts.shm (a dict), got {0}'.format(
            type(shm).__name__))
    if not is_sequence(gpu_memory_mib) or isinstance(gpu_memory_mib, str):
        raise AnsibleFilterError('nodeprep_shm_plan: gpu_memory_mib must be a list of MiB, got {0!r}'.format(
            gpu_memory_mib))
    try:
        return shm_plan(plain(shm or {}), plain(gpu_memory_mib), plain_dict(settings, 'nodeprep_shm_plan', 'settings'))
    except (ShmError, TypeError, ValueError) as exc:
        raise AnsibleFilterError('nodeprep_shm_plan: {0}'.format(exc))


class FilterModule(object):
    def filters(self):
        return {'shm_predict': shm_predict, 'nodeprep_shm_plan': nodeprep_shm_plan}
