# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Test helper for tests/unit/test_bad_input.py only (not part of the collection's plugins): returns the
# platform facts it is given, so a role case can run as if on another distribution. It changes nothing.

from __future__ import absolute_import, division, print_function
__metaclass__ = type

from ansible.module_utils.basic import AnsibleModule


def main():
    module = AnsibleModule(argument_spec=dict(facts=dict(type='dict', required=True)), supports_check_mode=True)
    module.exit_json(changed=False, ansible_facts=module.params['facts'])


if __name__ == '__main__':
    main()
