# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function
__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.nodeprep.plugins.module_utils._gpu_settings import settings_problems
from ansible_collections.gpufleet.nodeprep.plugins.plugin_utils._filter_input import plain


def gpu_settings_problems(settings, prefix='nodeprep_gpu_settings_'):
    """Sentences naming each malformed GPU setting (the rules of nvidia_gpu); [] when all are usable."""
    if not isinstance(settings, dict):
        raise AnsibleFilterError('gpu_settings_problems: input must be a dict of role variables, got {0}'.format(
            type(settings).__name__))
    return settings_problems(plain(settings), prefix)


class FilterModule(object):
    def filters(self):
        return {'gpu_settings_problems': gpu_settings_problems}
